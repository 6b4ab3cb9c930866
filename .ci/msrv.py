#!/usr/bin/env python3
"""The lockfile keeps the workspace's rust-version true.

Every workspace crate that states a rust-version must build with that
Rust: so must each package it depends on as the lockfile resolves it
(normal, build and dev dependencies, every feature on). This lists the
packages whose own rust-version is newer, and fails if there is one.

What this cannot see, and what else checks the minimum: the standard
library items the code uses are checked by clippy's `incompatible_msrv`
lint (on by default; CI denies warnings), language features only by a
build with that toolchain, which this machine does not have.

Run from the repository's root: `python3 .ci/msrv.py`.
"""

import json
import subprocess
import sys


def version(v):
    """A rust-version as a comparable triple ('1.87' -> (1, 87, 0))."""
    parts = [int(x) for x in v.split(".")] if v else []
    return tuple((parts + [0, 0, 0])[:3])


meta = json.loads(
    subprocess.check_output(
        ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"]
    )
)
packages = {p["id"]: p for p in meta["packages"]}
nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
members = [packages[m] for m in meta["workspace_members"]]

problems = []
for member in members:
    floor = member.get("rust_version")
    if not floor:
        continue
    todo = [d["pkg"] for d in nodes[member["id"]]["deps"]]
    seen = set()
    while todo:
        pkg = todo.pop()
        if pkg in seen:
            continue
        seen.add(pkg)
        for d in nodes[pkg]["deps"]:
            if any(k["kind"] in (None, "build") for k in d["dep_kinds"]):
                todo.append(d["pkg"])
    for pkg in sorted(seen, key=lambda i: packages[i]["name"]):
        p = packages[pkg]
        if version(p.get("rust_version")) > version(floor):
            problems.append(
                f"{member['name']} (rust-version {floor}) depends on "
                f"{p['name']} {p['version']}, which needs Rust {p['rust_version']}"
            )

for line in problems:
    print(line)
if problems:
    sys.exit(
        "msrv: the lockfile needs a newer Rust than the workspace states; "
        "`cargo update -p NAME` picks a release within it (.cargo/config.toml), "
        "or raise rust-version"
    )
print(f"msrv: {len(members)} workspace crates, every dependency within its rust-version")
