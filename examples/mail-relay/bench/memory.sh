#!/usr/bin/env bash
# The relay's memory with many sessions deep in DATA (the target: 1000
# sessions, each halfway through a 10 MB message, under 200 MB RSS).
#
#   bash examples/mail-relay/bench/memory.sh [SESSIONS] [OCTETS_EACH]
#                                              (default: 1000 5000000)
#
# Starts the release relay in a temporary directory, opens SESSIONS SMTP
# sessions from one Python process, sends OCTETS_EACH octets of message text
# into each DATA without the final dot, waits until the relay has written
# all of it into its spool's tmp/, and prints the relay's RSS (VmRSS) and
# peak (VmHWM). Needs SESSIONS x OCTETS_EACH of free disk under /tmp.
#
# MAIL_RELAY=path/to/mail-relay measures that binary instead of building
# this tree's.
set -euo pipefail
cd "$(dirname "$0")/../../.."
sessions=${1:-1000}
each=${2:-5000000}
. examples/mail-relay/bench/relay.sh
relay_binary
work=$(mktemp -d /tmp/mail-relay-mem.XXXXXX)
pid=
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n 8192
start_relay "$work" "$sessions"
echo "relay pid $pid on $addr; idle RSS $(awk '/VmRSS/{print $2/1024 " MB"}' /proc/$pid/status)"
python3 - "$addr" "$sessions" "$each" "$pid" "$work/spool/tmp" <<'PY'
import os, socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
n, each, pid, tmp = int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
line = b"m" * 998 + b"\r\n"
chunk = line * (each // len(line))
socks = []
t0 = time.time()
for i in range(n):
    s = socket.create_connection((host, int(port)))
    f = s.makefile("rb")
    def reply():
        while True:
            l = f.readline()
            if l[3:4] != b"-":
                return l
    assert reply().startswith(b"220")
    for cmd, code in ((b"EHLO bench.test", b"250"), (b"MAIL FROM:<s@example.test>", b"250"),
                      (b"RCPT TO:<a@example.test>", b"250"), (b"DATA", b"354")):
        s.sendall(cmd + b"\r\n")
        r = reply()
        assert r.startswith(code), r
    s.sendall(chunk)
    socks.append((s, f))
print(f"{n} sessions each sent {len(chunk)} octets into DATA in {time.time() - t0:.1f} s")
# Wait until the relay has written what it buffers beyond its 64 KiB a session.
want = n * (len(chunk) - 65536)
while sum(os.path.getsize(os.path.join(tmp, e)) for e in os.listdir(tmp)) < want:
    time.sleep(0.1)
status = open(f"/proc/{pid}/status").read()
kb = {l.split(":")[0]: int(l.split()[1]) for l in status.splitlines() if l.startswith(("VmRSS", "VmHWM"))}
print(f"relay RSS {kb['VmRSS'] / 1024:.0f} MB (peak {kb['VmHWM'] / 1024:.0f} MB) with {n} sessions "
      f"each {len(chunk) / 1e6:.1f} MB into DATA")
PY
