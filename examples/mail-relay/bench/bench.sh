#!/usr/bin/env bash
# The mail relay's acceptance benchmark, side by side with Postfix in one run.
#
#   bash examples/mail-relay/bench/bench.sh [SESSIONS...]      (default: 1 20 100)
#
# For each session count, Postfix's smtp-source sends 1 KiB messages (a new
# connection per message, as by default) first to mail-relay, then to a private
# Postfix instance (../shared/peers/postfix-relay.sh) that relays to an
# smtp-sink. Both fsync every message before their 250 (mail-relay always;
# Postfix by default). Reported per server:
#   accepted msg/s   messages / smtp-source's wall time
#   CPU s/1000 msg   user+system CPU of the server's processes from the first
#                    message until its queue is empty again (so it includes
#                    delivery: mail-relay's into its Maildir, Postfix's qmgr and
#                    smtp client to the sink), per 1 000 messages
# MESSAGES (env) sets the message count per run (default: 1000 for 1 session,
# 10000 otherwise).
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$(pwd)
peers=${PEERS:-$root/../shared/peers}

command -v smtp-source >/dev/null 2>&1 || bash "$peers/postfix-relay.sh" install
cargo build --release -q -p mail-relay
relay_bin=$root/target/release/mail-relay

work=$(mktemp -d /tmp/mail-relay-bench.XXXXXX)
chmod 755 "$work" # Postfix's own processes (user postfix) must reach its directories
relay_pid= sink_pid=
cleanup() {
  [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null || true
  bash "$peers/postfix-relay.sh" stop "$work/pf" >/dev/null 2>&1 || true
  [ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

tck=$(getconf CLK_TCK)
# user+system CPU seconds of one process (all its threads)
proc_cpu() { awk -v t="$tck" '{printf "%.2f\n", ($14+$15)/t}' "/proc/$1/stat"; }
# sessions server messages t0 t1 cpu0 cpu1
report() {
  awk -v n="$1" -v who="$2" -v m="$3" -v t="$5" -v t0="$4" -v c1="$7" -v c0="$6" \
    'BEGIN{printf "%-9s %-10s %9.0f %15.2f %9d\n", n, who, m/(t-t0), (c1-c0)*1000/m, m}'
}
count() { find "$1" -type f 2>/dev/null | wc -l; }

# The sink Postfix relays to.
smtp-sink -u nobody 127.0.0.1:2601 1000 &
sink_pid=$!
bash "$peers/postfix-relay.sh" start "$work/pf" 2600 2601 >/dev/null

printf '%-9s %-10s %9s %15s %9s\n' sessions server "msg/s" "CPU s/1000 msg" messages
for s in "${@:-1 20 100}"; do
  for n in $s; do
    m=${MESSAGES:-$([ "$n" = 1 ] && echo 1000 || echo 10000)}

    # mail-relay, a fresh spool and Maildir each run
    d=$work/relay-$n; mkdir -p "$d"
    "$relay_bin" --listen 127.0.0.1:2625 --spool-dir "$d/spool" --maildir "$d/maildir" \
      --max-sessions 1000 --max-sessions-per-client 1000 --log-level warn >/dev/null 2>"$d/log" &
    relay_pid=$!
    for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/2625) 2>/dev/null && break; sleep 0.05; done
    c0=$(proc_cpu "$relay_pid")
    t0=$(date +%s.%N)
    smtp-source -s "$n" -m "$m" -l 1024 -f a@example.test -t b@example.test 127.0.0.1:2625
    t1=$(date +%s.%N)
    while [ "$(count "$d/maildir/new")" -lt "$m" ] || [ "$(count "$d/spool/queue")" -gt 0 ]; do sleep 0.05; done
    c1=$(proc_cpu "$relay_pid")
    kill "$relay_pid"; wait "$relay_pid" || true; relay_pid=
    report "$n" mail-relay "$m" "$t0" "$t1" "$c0" "$c1"

    # Postfix, the same load into its queue, relayed on to the sink
    c0=$(bash "$peers/postfix-relay.sh" cpu "$work/pf")
    t0=$(date +%s.%N)
    smtp-source -s "$n" -m "$m" -l 1024 -f a@example.test -t b@example.test 127.0.0.1:2600
    t1=$(date +%s.%N)
    while [ "$(bash "$peers/postfix-relay.sh" queue "$work/pf")" -gt 0 ]; do sleep 0.1; done
    c1=$(bash "$peers/postfix-relay.sh" cpu "$work/pf")
    report "$n" postfix "$m" "$t0" "$t1" "$c0" "$c1"
  done
done
