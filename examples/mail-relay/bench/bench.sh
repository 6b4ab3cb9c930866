#!/usr/bin/env bash
# The mail relay's acceptance benchmark, side by side with Postfix in one run:
#
#   smtp-source --> mail-relay --> smtp-sink
#   smtp-source --> Postfix    --> smtp-sink      (bench/postfix.sh)
#
#   bash examples/mail-relay/bench/bench.sh [SESSIONS...]      (default: 1 20 100)
#   ROUTING="relayhost mx" bash examples/mail-relay/bench/bench.sh [SESSIONS...]
#
# For each session count, Postfix's smtp-source sends 1 KiB messages first to
# mail-relay, then to a private Postfix instance; both relay everything to the
# same smtp-sink (which only counts). Both fsync every message before their 250
# (mail-relay always; Postfix by default). Each combination of
#   client reuse     smtp-source's connections to the relay: "off" is a new
#                    connection per message (its default), "on" is -d (the next
#                    message over the same connection)
#   upstream reuse   the relay's connections to the sink: mail-relay's
#                    connection cache (`[smtp] connection_cache`), Postfix's
#                    on-demand connection cache (`smtp_connection_cache_on_demand`)
# is run for both servers. Reported per run:
#   accepted msg/s   messages / smtp-source's wall time
#   e2e msg/s        messages / time from the first message until the sink has
#                    counted them all (end to end)
#   CPU s/1000 msg   user+system CPU of the relay's processes (mail-relay's one
#                    process; Postfix's master and all its children) from the
#                    first message until its queue is empty again, per 1 000
#   lost             messages sent but not counted by the sink (must be 0)
# MESSAGES (env) sets the message count per run (default: 1000 for 1 session,
# 10000 otherwise); CLIENT_REUSE and UPSTREAM_REUSE (env) the values tried
# (default "off on" and "on off").
#
# RELAY_BIN (env) runs that mail-relay binary instead of building this tree's
# (to compare two builds in alternating runs); PEER=none leaves Postfix out.
#
# ROUTING (env) says how mail-relay finds the sink, one way or both in each
# combination (default "relayhost"):
#   relayhost   `relayhost = "127.0.0.1:SINK"`, no DNS (rows: mail-relay)
#   mx          MX routing, as an MTA (rows: relay-mx): dnsmasq on
#               127.0.0.1:$DNS_PORT (default: a free port; Debian's dnsmasq-base,
#               which scripts/test.sh installs) serves `example.test MX 10
#               mx.example.test` and `mx.example.test A 127.0.0.2`, TTL 300 s;
#               the relay has `[mx]` with that server and `port = SINK`, no
#               relayhost, and delivers to a second smtp-sink on
#               127.0.0.2:SINK. Each run starts a fresh relay, so its first
#               messages ask dnsmasq (MX, then A and AAAA of the exchanger)
#               and the rest use the resolver's cache. At most 20 deliveries
#               go to the domain at once (`[mx]`'s destination_concurrency_
#               limit), as to the relayhost (`[smtp]`'s) and in Postfix.
# Postfix's rows are relayhost in both modes: its MX lookups go through the
# C library's resolver, which reads /etc/resolv.conf and asks port 53 only,
# so an MX run of Postfix needs a DNS server on 127.0.0.1:53 and the
# machine's resolv.conf pointing at it (relayhost unset, `smtp_host_lookup =
# dns`); this script does not touch the machine's resolver, and compares
# relay-mx with mail-relay's own relayhost rows of the same run.
#
# Every server listens on a loopback port that was free when the run began
# (SINK above is the sinks' port), so a server left running (an smtp-sink
# from README's example) cannot take a share of the connections.
set -euo pipefail
cd "$(dirname "$0")/../../.."
root=$(pwd)
peer=$root/examples/mail-relay/bench/postfix.sh

bash scripts/install-postfix.sh
if [ -n "${RELAY_BIN:-}" ]; then
  relay_bin=$RELAY_BIN
else
  cargo build --release -q -p mail-relay
  relay_bin=${CARGO_TARGET_DIR:-$root/target}/release/mail-relay
fi
with_peer=${PEER:-postfix}
routing=${ROUTING:-relayhost}
for r in $routing; do
  case $r in
  relayhost) ;;
  mx) command -v dnsmasq >/dev/null || {
    echo "bench.sh: ROUTING=mx needs dnsmasq (apt-get install dnsmasq-base)" >&2
    exit 1
  } ;;
  *) echo "bench.sh: ROUTING: unknown mode '$r' (relayhost, mx)" >&2; exit 2 ;;
  esac
done
# Free loopback ports, TCP and UDP (the kernel's choice), one per server:
# Postfix's smtpd, the sinks, mail-relay, dnsmasq.
read -r pf_port sink_port relay_port free_dns_port < <(python3 -c '
import socket
held = []
for _ in range(4):
    while True:
        t = socket.socket()
        t.bind(("127.0.0.1", 0))
        u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            u.bind(("127.0.0.1", t.getsockname()[1]))
            t2 = socket.socket()
            t2.bind(("127.0.0.2", t.getsockname()[1]))
        except OSError:
            continue
        held += [t, u, t2]
        break
print(*[s.getsockname()[1] for s in held[::3]])
')
dns_port=${DNS_PORT:-$free_dns_port}

work=$(mktemp -d /tmp/mail-relay-bench.XXXXXX)
# As root, the relay runs only when told to (or given a user to drop to).
as_root=$([ "$(id -u)" = 0 ] && echo 'run_as_root = true' || true)
chmod 755 "$work" # Postfix's own processes (user postfix) must reach its directories
relay_pid= sink_pid= mx_sink_pid= dns_pid=
cleanup() {
  [ -n "$relay_pid" ] && kill "$relay_pid" 2>/dev/null || true
  bash "$peer" stop "$work/pf" >/dev/null 2>&1 || true
  [ -n "$sink_pid" ] && kill "$sink_pid" 2>/dev/null || true
  [ -n "$mx_sink_pid" ] && kill "$mx_sink_pid" 2>/dev/null || true
  [ -n "$dns_pid" ] && kill "$dns_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

tck=$(getconf CLK_TCK)
# user+system CPU seconds of one process (all its threads)
proc_cpu() { awk -v t="$tck" '{printf "%.2f\n", ($14+$15)/t}' "/proc/$1/stat"; }
now() { date +%s.%N; }
count() { find "$1" -type f 2>/dev/null | wc -l; }
# messages the sink of $sink_out has counted so far
sink_out=$work/sink.out
sunk() { tr '\r' '\n' < "$sink_out" | grep mesg= | tail -1 | sed 's/.*mesg=//' || echo 0; }
sunk_now() { local n; n=$(sunk); echo "${n:-0}"; }
# waits until the sink has counted $1 messages, or 120 s without progress
wait_sunk() {
  local want=$1 last=-1 since
  since=$(now)
  while :; do
    local n; n=$(sunk_now)
    [ "$n" -ge "$want" ] && return 0
    if [ "$n" != "$last" ]; then last=$n since=$(now); fi
    if awk -v a="$(now)" -v b="$since" 'BEGIN{exit !(a-b > 120)}'; then return 1; fi
    sleep 0.02
  done
}
# sessions client upstream server messages t0 t_accepted t_e2e cpu0 cpu1 lost
report() {
  awk -v n="$1" -v cr="$2" -v ur="$3" -v who="$4" -v m="$5" -v t0="$6" -v t1="$7" -v t2="$8" \
    -v c0="$9" -v c1="${10}" -v lost="${11}" \
    'BEGIN{printf "%-9s %-7s %-9s %-10s %9.0f %9.0f %15.3f %9d %5d\n", n, cr, ur, who, m/(t1-t0), m/(t2-t0), (c1-c0)*1000/m, m, lost}'
}

# The sink both relays deliver to; -c prints its counters as they change.
smtp-sink -u nobody -c 127.0.0.1:"$sink_port" 1000 > "$work/sink.out" &
sink_pid=$!
[ "$with_peer" = none ] || bash "$peer" start "$work/pf" "$pf_port" "$sink_port" >/dev/null
if [[ " $routing " == *" mx "* ]]; then
  # The exchanger's sink, and the DNS server that names it.
  smtp-sink -u nobody -c 127.0.0.2:"$sink_port" 1000 > "$work/sink-mx.out" &
  mx_sink_pid=$!
  dnsmasq --no-daemon --conf-file=/dev/null --pid-file= --no-resolv --no-hosts \
    --bind-interfaces --listen-address=127.0.0.1 --port="$dns_port" --local=/test/ \
    --cache-size=0 --local-ttl=300 \
    --mx-host=example.test,mx.example.test,10 --host-record=mx.example.test,127.0.0.2 \
    2> "$work/dnsmasq.log" &
  dns_pid=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$dns_port") 2>/dev/null && break; sleep 0.05; done
  kill -0 "$dns_pid" 2>/dev/null || { cat "$work/dnsmasq.log" >&2; exit 1; }
fi
postfix_cache() {
  postconf -c "$work/pf/etc" -e "smtp_connection_cache_on_demand = $([ "$1" = on ] && echo yes || echo no)"
  postfix -c "$work/pf/etc" reload >/dev/null 2>&1
  sleep 1
}

printf '%-9s %-7s %-9s %-10s %9s %9s %15s %9s %5s\n' \
  sessions client upstream server "accepted/s" "e2e/s" "CPU s/1000 msg" messages lost
for n in ${@:-1 20 100}; do
  m=${MESSAGES:-$([ "$n" = 1 ] && echo 1000 || echo 10000)}
  for cr in ${CLIENT_REUSE:-off on}; do
    source_args=(-s "$n" -m "$m" -l 1024 -f a@example.test -t b@example.test)
    [ "$cr" = on ] && source_args+=(-d)
    for ur in ${UPSTREAM_REUSE:-on off}; do
      for route in $routing; do
        # mail-relay, a fresh spool each run
        d=$work/relay-$n-$cr-$ur-$route; mkdir -p "$d"
        if [ "$route" = mx ]; then
          sink_out=$work/sink-mx.out who=relay-mx relayhost=
          mx="[mx]
enabled = true
dns_servers = [\"127.0.0.1:$dns_port\"]
port = $sink_port"
        else
          sink_out=$work/sink.out who=mail-relay mx=
          relayhost="relayhost = \"127.0.0.1:$sink_port\""
        fi
        cat > "$d/relay.toml" <<EOF
listen = "127.0.0.1:$relay_port"
spool_dir = "$d/spool"
maildir = "$d/maildir"
max_sessions = 1000
max_sessions_per_client = 1000
log_level = "warn"
$as_root
$relayhost
[smtp]
connection_cache = $([ "$ur" = on ] && echo true || echo false)
$mx
EOF
        "$relay_bin" --config "$d/relay.toml" >/dev/null 2>"$d/log" &
        relay_pid=$!
        for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/"$relay_port") 2>/dev/null && break; sleep 0.05; done
        base=$(sunk_now)
        c0=$(proc_cpu "$relay_pid")
        t0=$(now)
        smtp-source "${source_args[@]}" 127.0.0.1:"$relay_port"
        t1=$(now)
        wait_sunk $((base + m)) || true
        t2=$(now)
        while [ "$(count "$d/spool/queue")" -gt 0 ]; do sleep 0.02; done
        c1=$(proc_cpu "$relay_pid")
        lost=$((base + m - $(sunk_now)))
        kill "$relay_pid"; wait "$relay_pid" || true; relay_pid=
        report "$n" "$cr" "$ur" "$who" "$m" "$t0" "$t1" "$t2" "$c0" "$c1" "$lost"
      done
      sink_out=$work/sink.out
      [ "$with_peer" = none ] && continue

      # Postfix, the same load, relayed to the same sink
      postfix_cache "$ur"
      base=$(sunk_now)
      c0=$(bash "$peer" cpu "$work/pf")
      t0=$(now)
      smtp-source "${source_args[@]}" 127.0.0.1:"$pf_port"
      t1=$(now)
      wait_sunk $((base + m)) || true
      t2=$(now)
      while [ "$(bash "$peer" queue "$work/pf")" -gt 0 ]; do sleep 0.1; done
      c1=$(bash "$peer" cpu "$work/pf")
      lost=$((base + m - $(sunk_now)))
      report "$n" "$cr" "$ur" postfix "$m" "$t0" "$t1" "$t2" "$c0" "$c1" "$lost"
    done
  done
done
