#!/usr/bin/env python3
"""Instructions and cache misses per echo message, under cachegrind.

Runs one echo server of the net bench (coro, tokio, floor or floor-eagain)
under valgrind's cachegrind with the last-level cache set to this VM's
per-core L2 (512 KiB, 8-way), drives it with CONNS connections sending
64-byte messages, and prints the counts per message: the difference
between a run of MSGS and one of MSGS/4 messages, so connection set-up
cancels out. The counts are deterministic enough to compare layouts where
timed runs at 1 000 connections are lost in the kernel's noise (BENCHMARKS.md,
sockets and echo). Build the bench first:

    cargo bench -p coro-benches --bench net --no-run
    python3 benches/cachegrind/echo.py coro 1000 80000
"""
import glob
import os
import re
import selectors
import socket
import subprocess
import sys


def bench_binary():
    if os.environ.get("BIN"):
        return os.environ["BIN"]
    here = os.path.dirname(os.path.abspath(__file__))
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "..", "..", "target"))
    bins = [p for p in glob.glob(os.path.join(target, "release", "deps", "net-*")) if not p.endswith(".d")]
    if not bins:
        sys.exit("no net bench binary: run `cargo bench -p coro-benches --bench net --no-run`")
    return max(bins, key=os.path.getmtime)


def drive(port, conns, total):
    sel = selectors.DefaultSelector()
    socks = []
    for _ in range(conns):
        s = socket.create_connection(("127.0.0.1", port))
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s.setblocking(False)
        socks.append(s)
        sel.register(s, selectors.EVENT_READ)
    msg = b"x" * 64
    sent = done = 0
    pending = {}
    for s in socks:
        s.send(msg)
        sent += 1
    while done < total:
        for key, _ in sel.select(timeout=30):
            s = key.fileobj
            n = pending.get(s, 0) + len(s.recv(4096))
            while n >= 64:
                n -= 64
                done += 1
                if sent < total:
                    s.send(msg)
                    sent += 1
            pending[s] = n
    for s in socks:
        s.close()


def run(server, conns, msgs):
    env = dict(os.environ, CORO_NET_BENCH_ECHO_SERVER=server)
    p = subprocess.Popen(
        ["valgrind", "--tool=cachegrind", "--cache-sim=yes", "--LL=524288,8,64",
         "--cachegrind-out-file=/dev/null", bench_binary()],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    port = int(re.search(r"PORT=(\d+)", p.stdout.readline()).group(1))
    drive(port, conns, msgs)
    p.stdin.close()
    err = p.stderr.read()
    p.wait()
    counts = {}
    for name, label in [("instructions", r"I\s+refs"), ("D1 misses", r"D1\s+misses"),
                        ("L2 misses", r"LLd\s+misses")]:
        m = re.search(r"==\d+== " + label + r":\s+([\d,]+)", err)
        counts[name] = int(m.group(1).replace(",", ""))
    return counts


def main():
    server, conns, msgs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    small = run(server, conns, msgs // 4)
    big = run(server, conns, msgs)
    per = {k: (big[k] - small[k]) / (msgs - msgs // 4) for k in big}
    print(f"{server} {conns} connections: " + ", ".join(f"{v:.1f} {k}" for k, v in per.items()) + " per message")


if __name__ == "__main__":
    main()
