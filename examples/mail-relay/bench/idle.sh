#!/usr/bin/env bash
# The relay's memory with many idle SMTP sessions: clients that read the
# 220 greeting and then sit, as a slow or stalled client does.
#
#   bash examples/mail-relay/bench/idle.sh [SESSIONS...]     (default: 1000 10000)
#
# For each count, starts the release relay in a temporary directory, reads
# its RSS (VmRSS, from /proc) before any session, opens SESSIONS sessions
# from one Python process, waits until every session has had its greeting
# and the runtime has released the idle threads' stacks (the RSS stops
# falling), and prints the RSS then, and per session.
#
# MAIL_RELAY=path/to/mail-relay measures that binary instead of building
# this tree's (to compare two builds, e.g. with and without an option).
# Raises the open-file limit to what the sessions need (the relay raises
# its own soft limit to its hard limit at start).
set -euo pipefail
cd "$(dirname "$0")/../../.."
counts=("$@")
[ ${#counts[@]} -gt 0 ] || counts=(1000 10000)
. examples/mail-relay/bench/relay.sh
relay_binary
max=0
for n in "${counts[@]}"; do [ "$n" -gt "$max" ] && max=$n; done
need=$((max + 1000))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    ulimit -n "$need" 2>/dev/null || ulimit -n "$(ulimit -Hn)"
fi
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    echo "idle.sh: the open-file limit is $(ulimit -n), $need needed (raise the hard limit)" >&2
    exit 1
fi
work=
pid=
cleanup() {
    if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
    [ -z "$work" ] || rm -rf "$work"
    pid=
    work=
}
trap cleanup EXIT

for n in "${counts[@]}"; do
    work=$(mktemp -d /tmp/mail-relay-idle.XXXXXX)
    start_relay "$work" "$n"
    python3 - "$addr" "$n" "$pid" <<'PY'
import socket, sys, time

host, port = sys.argv[1].rsplit(":", 1)
n, pid = int(sys.argv[2]), sys.argv[3]


def rss_kib():
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("the relay is gone")


time.sleep(3)  # past the runtime's idle-stack release of the listener's threads
before = rss_kib()
socks = []
for i in range(n):
    s = socket.create_connection((host, int(port)))
    socks.append(s)
buf = {s: b"" for s in socks}
for s in socks:  # every session has been greeted: its green thread is parked in a read
    while not buf[s].endswith(b"\r\n"):
        chunk = s.recv(512)
        if not chunk:
            raise SystemExit(f"session closed before its greeting: {buf[s]!r}")
        buf[s] += chunk
    if not buf[s].startswith(b"220"):
        raise SystemExit(f"not a greeting: {buf[s]!r}")
# The runtime releases an idle thread's stack once it has been parked for
# `idle_stack_release` (2 s by default): wait past that, then until the RSS
# has held still for three seconds.
time.sleep(5)
last, still = rss_kib(), 0
for _ in range(120):
    time.sleep(1)
    now = rss_kib()
    still = still + 1 if abs(now - last) < 64 else 0
    last = now
    if still == 3:
        break
now = rss_kib()
per = (now - before) * 1024 / n
print(f"{n:6} idle sessions: RSS {now / 1024:7.1f} MiB (before the sessions {before / 1024:.1f} MiB; "
      f"{per / 1024:.2f} KiB a session)")
for s in socks:
    s.close()
PY
    cleanup
done
