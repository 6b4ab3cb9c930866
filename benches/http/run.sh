#!/usr/bin/env bash
# The HTTP benchmark: coro's examples/http.rs beside
# may_minihttp and hyper on tokio (current-thread, one runtime per core),
# all serving TechEmpower's /plaintext and /json, loaded by wrk.
#
#   bash benches/http/run.sh            # every row, 3 rounds of 10 s
#   ROUNDS=5 DURATION=5 bash benches/http/run.sh
#   ROWS="plaintext json" CORES=1 bash benches/http/run.sh
#
# Layout: with CORES=1 (the default, then CORES=2 if the machine has at
# least 2 CPUs and TWO=1) each server runs pinned to CPU 0 and wrk (one
# thread) to CPU 1, so the server has a core to itself. With two server
# cores on a 2-CPU machine, server and wrk share both CPUs: that row says
# how the servers scale when the load generator competes with them.
#
# Rows: plaintext and json with keep-alive (CONNS connections, 256 by
# default), plaintext with 16 requests pipelined (TechEmpower's), and
# plaintext on short-lived connections (`Connection: close` every PER_CONN
# requests, 10 by default: HttpArena's short-lived condition).
#
# Within each round the three servers run one after the other (the order
# rotates each round), so every ratio compares runs minutes apart at most.
# Measured per run: requests/s and p99 latency (wrk --latency), and the
# server's CPU per request (utime + stime of the server process from
# /proc/PID/stat over the wrk run, divided by wrk's request count), and
# how busy the server's and wrk's CPUs were (from /proc/stat, softirq
# included: a row where wrk's CPU is saturated says as much about wrk as
# about the server).
# Output: one line per run (raw), then medians per row and server, with
# ratios coro / peer. The machine's load average is printed before and
# after: figures on a shared machine are noisy.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cd "$root"

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-256}
PER_CONN=${PER_CONN:-10}
ROWS=${ROWS:-"plaintext json pipelined short"}
CORES=${CORES:-}
TWO=${TWO:-1}
PORT=${PORT:-18480}

if ! command -v wrk >/dev/null; then
    echo "run.sh: installing wrk (Debian's package)" >&2
    apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y wrk >/dev/null; }
fi
command -v wrk >/dev/null || { echo "run.sh: wrk is missing and could not be installed" >&2; exit 1; }
command -v taskset >/dev/null || { echo "run.sh: taskset (util-linux) is missing" >&2; exit 1; }

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build --release -q -p coro-examples --example http
cargo build --release -q -p coro-benches --bin http-may --bin http-hyper
bin=$CARGO_TARGET_DIR/release
ncpu=$(nproc)
if [ -z "$CORES" ]; then
    CORES=1
    if [ "$ncpu" -ge 2 ] && [ "$TWO" = 1 ]; then CORES="1 2"; fi
fi
for cores in $CORES; do
    if ! [ "$cores" -ge 1 ] 2>/dev/null || [ "$cores" -gt "$ncpu" ]; then
        echo "run.sh: CORES=$CORES: each must be 1..$ncpu (this machine's CPUs)" >&2
        exit 1
    fi
done
hz=$(getconf CLK_TCK)

# start NAME THREADS CPUS: starts a server, sets $pid.
start() {
    local name=$1 threads=$2 cpus=$3
    case $name in
        coro) CORO_HTTP_THREADS=$threads taskset -c "$cpus" "$bin/examples/http" "127.0.0.1:$PORT" 2>/dev/null & ;;
        may) HTTP_THREADS=$threads taskset -c "$cpus" "$bin/http-may" "127.0.0.1:$PORT" 2>/dev/null & ;;
        hyper) HTTP_THREADS=$threads taskset -c "$cpus" "$bin/http-hyper" "127.0.0.1:$PORT" 2>/dev/null & ;;
    esac
    pid=$!
    for _ in $(seq 100); do
        if curl -fs "http://127.0.0.1:$PORT/plaintext" >/dev/null 2>&1; then return; fi
        sleep 0.05
    done
    echo "run.sh: $name did not start" >&2
    kill "$pid" 2>/dev/null || true
    exit 1
}

stop() {
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# CPU ticks (user + system) of process $pid.
ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }

# The per-CPU lines of /proc/stat, `;`-separated on one line.
cpustat() { grep -E '^cpu[0-9]+ ' /proc/stat | tr '\n' ';'; }

# busy BEFORE AFTER CPUS: how busy CPUS (taskset's list: "1", "0-1") were
# between two `cpustat`s, in percent, counting everything but idle and
# iowait. Unlike a process's CPU time this includes the softirq time of
# loopback TCP, which the kernel accounts to the CPU, not to a process;
# it also includes whatever else ran there (see the load average).
busy() {
    python3 - "$1" "$2" "$3" <<'PY'
import sys
def parse(s):
    out = {}
    for line in filter(None, s.split(";")):
        f = line.split()
        # user nice system idle iowait irq softirq steal (guest time is
        # already in user and nice).
        v = [int(x) for x in f[1:9]]
        out[int(f[0][3:])] = (sum(v), v[3] + v[4])
    return out
a, b = parse(sys.argv[1]), parse(sys.argv[2])
lo, _, hi = sys.argv[3].partition("-")
cpus = range(int(lo), int(hi or lo) + 1)
total = sum(b[c][0] - a[c][0] for c in cpus)
idle = sum(b[c][1] - a[c][1] for c in cpus)
print(f"{100 * (total - idle) / max(total, 1):.0f}")
PY
}

# wrk arguments of a row.
row_args() {
    case $1 in
        plaintext) echo "http://127.0.0.1:$PORT/plaintext" ;;
        json) echo "http://127.0.0.1:$PORT/json" ;;
        pipelined) echo "-s $here/pipeline.lua http://127.0.0.1:$PORT/plaintext" ;;
        short) echo "-s $here/close_every.lua http://127.0.0.1:$PORT/plaintext" ;;
    esac
}

# p99 from wrk --latency, in microseconds.
p99_us() {
    awk '$1 == "99%" {
        v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v);
        f = (u == "us") ? 1 : (u == "ms") ? 1000 : (u == "s") ? 1000000 : 0;
        printf "%.0f", v * f }'
}

raw=$(mktemp)
wout=$(mktemp)
trap 'stop 2>/dev/null; rm -f "$raw" "$wout"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# cores row round server req/s p99_us cpu_ns_per_req server_cpus_busy_% wrk_cpus_busy_% wrk_own_cpu_% errors"
servers=(coro may hyper)
for cores in $CORES; do
    if [ "$cores" = 1 ]; then scpu=0; wcpu=$((ncpu > 1 ? 1 : 0)); else scpu=0-$((cores - 1)); wcpu=0-$((ncpu - 1)); fi
    for row in $ROWS; do
        for round in $(seq "$ROUNDS"); do
            for k in 0 1 2; do
                name=${servers[$(((k + round) % 3))]}
                start "$name" "$cores" "$scpu"
                t0=$(ticks)
                c0=$(cpustat)
                # bash's `time`: wrk's own CPU time (user, system) and the
                # wall time.
                times=$( { TIMEFORMAT='%U %S %R'; time PER_CONN=$PER_CONN taskset -c "$wcpu" wrk -t"$cores" -c"$CONNS" -d"${DURATION}s" --latency $(row_args "$row") >"$wout" 2>&1; } 2>&1 )
                c1=$(cpustat)
                out=$(cat "$wout")
                t1=$(ticks)
                stop
                reqs=$(echo "$out" | awk '/requests in/ { print $1 }')
                rps=$(echo "$out" | awk '/Requests\/sec/ { printf "%.0f", $2 }')
                p99=$(echo "$out" | p99_us)
                errs=$(echo "$out" | awk '/Socket errors|Non-2xx/ { printf "%s ", $0 }')
                cpu=$(awk -v d=$((t1 - t0)) -v n="$reqs" -v hz="$hz" 'BEGIN { printf "%.0f", d * 1e9 / hz / n }')
                wrk_own=$(echo "$times" | awk -v n="$(taskset -c "$wcpu" nproc)" '{ printf "%.0f", 100 * ($1 + $2) / $3 / n }')
                share="$(busy "$c0" "$c1" "$scpu") $(busy "$c0" "$c1" "$wcpu") $wrk_own"
                line="$cores $row $round $name $rps $p99 $cpu $share ${errs:-none}"
                echo "$line"
                echo "$line" >>"$raw"
            done
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "Medians over $ROUNDS rounds (${DURATION} s each, $CONNS connections):"
echo
echo "| server cores | row | coro req/s | may req/s | hyper req/s | coro/may | coro/hyper | coro p99 | may p99 | hyper p99 | coro CPU/req | may CPU/req | hyper CPU/req | CPU coro/may | CPU coro/hyper |"
echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
python3 - "$raw" <<'PY'
import sys, statistics as st
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    cores, row, _, name = f[:4]
    rows.setdefault((cores, row), {}).setdefault(name, []).append([float(x) for x in f[4:10]])
meds = {}
for (cores, row), by in rows.items():
    med = {n: [st.median(x[i] for x in v) for i in range(6)] for n, v in by.items()}
    meds[(cores, row)] = med
    c, m, h = med["coro"], med["may"], med["hyper"]
    # wrk prints 0 for its upper percentiles when requests are pipelined
    # (it times a batch of responses from one start): no p99 then.
    us = lambda v: "n/a" if v <= 0 else f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} µs"
    print(f"| {cores} | {row} | {c[0]:,.0f} | {m[0]:,.0f} | {h[0]:,.0f} | {c[0]/m[0]:.2f} | {c[0]/h[0]:.2f} | "
          f"{us(c[1])} | {us(m[1])} | {us(h[1])} | {c[2]:,.0f} ns | {m[2]:,.0f} ns | {h[2]:,.0f} ns | "
          f"{c[2]/m[2]:.2f} | {c[2]/h[2]:.2f} |".replace(",", " "))
print()
print("How busy the CPUs were (medians): the server's CPUs, wrk's CPUs (both from")
print("/proc/stat, softirq and anything else running there included), and wrk's own")
print("CPU time over its CPUs. Where wrk's own share is near 100 % the row measures")
print("the load generator as much as the server.")
print()
print("| server cores | row | coro: server CPUs / wrk CPUs / wrk | may | hyper |")
print("|---|---|---|---|---|")
for (cores, row), med in meds.items():
    cells = " | ".join(f"{med[n][3]:.0f} / {med[n][4]:.0f} / {med[n][5]:.0f} %" for n in ("coro", "may", "hyper"))
    print(f"| {cores} | {row} | {cells} |")
PY
