#!/usr/bin/env bash
# The benchmark's peer: a private Postfix instance beside the mail relay
# (bench.sh drives it). Postfix comes from scripts/install-postfix.sh.
#
#   postfix.sh start DIR LISTEN UPSTREAM   Postfix with its config, queue, data and log under DIR,
#                                          accepting SMTP on 127.0.0.1:LISTEN and relaying
#                                          everything to 127.0.0.1:UPSTREAM (an smtp-sink)
#   postfix.sh cpu DIR                     user+system CPU seconds its processes have used so far
#   postfix.sh queue DIR                   messages still in its queue
#   postfix.sh stop DIR                    stops it (DIR may be removed afterwards)
#
# Loopback only, no DNS, every client in 127.0.0.0/8 may relay, and each queue
# file is fsynced before the 250 (Postfix's default), as the relay does. The
# instance runs as root; Postfix's own processes (user postfix) must reach DIR.
set -euo pipefail

usage() { sed -n '2,13p' "$0" >&2; exit 2; }
abs() { (cd "$1" && pwd); }

case "${1:-}" in
start)
  [ $# -eq 4 ] || usage
  dir=$2 listen=$3 upstream=$4
  bash "$(dirname "$0")/../../../scripts/install-postfix.sh"
  mkdir -p "$dir/etc" "$dir/spool" "$dir/data" "$dir/log"
  dir=$(abs "$dir")
  # master.cf: the system's services, none chrooted, and smtpd on our port
  # instead of port 25.
  awk -v listen="$listen" '
    /^smtp[ \t]+inet[ \t]/ { print "#" $0; next }
    /^[a-z0-9.-]+[ \t]+(unix|inet|fifo|unix-dgram|pass)[ \t]/ && $5 == "y" { $5 = "n" }
    { print }
    END { print "127.0.0.1:" listen " inet n - n - - smtpd" }
  ' /etc/postfix/master.cf > "$dir/etc/master.cf"
  cat > "$dir/etc/main.cf" <<EOF
compatibility_level = 3.6
queue_directory = $dir/spool
data_directory = $dir/data
maillog_file = $dir/log/maillog
maillog_file_prefixes = $dir
myhostname = peer.coro.test
inet_interfaces = loopback-only
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
smtpd_relay_restrictions = permit_mynetworks, reject_unauth_destination
smtpd_peername_lookup = no
mydestination =
relay_domains =
local_recipient_maps =
alias_maps =
alias_database =
local_transport = error:no local delivery in the benchmark peer
relayhost = [127.0.0.1]:$upstream
smtp_dns_support_level = disabled
smtp_host_lookup = native
EOF
  chown -R postfix "$dir/data"
  postfix -c "$dir/etc" set-permissions >/dev/null 2>&1 || true
  postfix -c "$dir/etc" check
  postfix -c "$dir/etc" start
  for _ in $(seq 50); do
    (exec 3<>"/dev/tcp/127.0.0.1/$listen") 2>/dev/null && exit 0
    sleep 0.1
  done
  echo "postfix.sh: nothing listens on 127.0.0.1:$listen after 5 s (see $dir/log/maillog)" >&2
  exit 1
  ;;
cpu)
  [ $# -eq 2 ] || usage
  dir=$(abs "$2")
  master=$(tr -d ' ' < "$dir/spool/pid/master.pid" | head -1)
  # the master (with its reaped children's time) and each live child
  {
    awk '{ print $14 + $15 + $16 + $17 }' "/proc/$master/stat"
    for p in $(pgrep -P "$master" || true); do
      [ -r "/proc/$p/stat" ] && awk '{ print $14 + $15 }' "/proc/$p/stat"
    done
  } | awk -v hz="$(getconf CLK_TCK)" '{ s += $1 } END { printf "%.2f\n", s / hz }'
  ;;
queue)
  [ $# -eq 2 ] || usage
  dir=$(abs "$2")
  find "$dir/spool/incoming" "$dir/spool/active" "$dir/spool/deferred" "$dir/spool/maildrop" \
    -type f 2>/dev/null | wc -l
  ;;
stop)
  [ $# -eq 2 ] || usage
  dir=$(abs "$2")
  postfix -c "$dir/etc" stop >/dev/null 2>&1 || true
  ;;
*)
  usage
  ;;
esac
