#!/usr/bin/env bash
# The interop benchmark: hyper and tokio-postgres on coro beside
# the same code on tokio's current-thread runtime, alternating, ROUNDS times.
#
#   bash benches/interop/run.sh [ROUNDS]     # default 3
#
# hyper: the server (interop-peer hyper-coro|hyper-tokio) pinned to CPU 0,
# wrk (Debian's package) on CPU 1: `wrk -t1 -c50 -d5s`, plain-text
# "Hello, World!" over keep-alive connections. Reports requests/s and the
# server's CPU time per request (utime+stime from /proc/PID/stat).
# tokio-postgres: 50 green threads / tasks x 400 queries pipelined on one
# connection to a throwaway server (benches/interop/pg.sh), queries/s and
# CPU per query of the client process.
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
command -v wrk >/dev/null || { echo "run.sh: wrk is not installed (apt-get install wrk)" >&2; exit 1; }
cargo build --release -q -p coro-benches --bin interop-peer
peer=${CARGO_TARGET_DIR:-target}/release/interop-peer
tck=$(getconf CLK_TCK)

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

hyper_round() { # mode port
  taskset -c 0 "$peer" "hyper-$1" "127.0.0.1:$2" & local pid=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$2) 2>/dev/null && break; sleep 0.1; done
  wrk -t1 -c50 -d1s "http://127.0.0.1:$2/" >/dev/null   # warm-up
  local before; before=$(cpu_ticks $pid)
  local out; out=$(taskset -c 1 wrk -t1 -c50 -d5s "http://127.0.0.1:$2/")
  local after; after=$(cpu_ticks $pid)
  kill $pid; wait $pid 2>/dev/null || true
  local reqs rps
  reqs=$(echo "$out" | awk '/requests in/ {print $1}')
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  awk -v m="$1" -v r="$rps" -v n="$reqs" -v c=$((after - before)) -v t="$tck" \
    'BEGIN { printf "hyper/%-5s %10.0f req/s %8.2f us CPU/req\n", m, r, c / t * 1e6 / (n + 0) }'
}

echo "# machine: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  hyper_round coro 18080
  hyper_round tokio 18081
done

conninfo=$(bash benches/interop/pg.sh start 55433)
trap 'bash benches/interop/pg.sh stop 55433' EXIT
for r in $(seq "$rounds"); do
  "$peer" pg-coro "$conninfo" 50 400
  "$peer" pg-tokio "$conninfo" 50 400
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
