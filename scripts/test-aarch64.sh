#!/usr/bin/env bash
# The runtime's, sync's and net's test suites built for aarch64 Linux and
# run under qemu-user (CI runs this after README's test command).
#
# Installs what it needs when missing: the Rust target, Debian's cross
# linker and C library, qemu-user, and the tools the net tests drive (the
# list below; scripts/test.sh installs them too). The linker and the runner
# are set here, for this run only, not in a .cargo/config that would change
# every build of whoever checks the project out. Tests that start this test
# binary again as a child start it through the same runner
# (CORO_TEST_RUNNER); a test that cannot work under emulation says so on
# stderr, in a line that starts with SKIPPED. Extra arguments go to
# `cargo test`.
#
# The unit and integration tests run here; the doctests (API examples,
# nothing architecture-specific, each its own binary to build) run natively
# in scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

target=aarch64-unknown-linux-gnu

# command or file -> Debian package that provides it
needs=(
  "qemu-aarch64:qemu-user"
  "aarch64-linux-gnu-gcc:gcc-aarch64-linux-gnu"
  "/usr/aarch64-linux-gnu/lib/libc.so:libc6-dev-arm64-cross"
  "socat:socat"          # net/tests/backdoor.rs
  "setpriv:util-linux"   # net/tests/backdoor.rs
  "dnsmasq:dnsmasq-base" # net/tests/dns_dnsmasq.rs
)
missing=()
for entry in "${needs[@]}"; do
  what=${entry%%:*} pkg=${entry#*:}
  if [[ $what == /* ]]; then
    [[ -e $what ]] || missing+=("$pkg")
  else
    command -v "$what" >/dev/null 2>&1 || missing+=("$pkg")
  fi
done
if ((${#missing[@]})); then
  echo "test-aarch64.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } ||
    { echo "test-aarch64.sh: cannot install ${missing[*]}, which the aarch64 tests need" >&2; exit 1; }
fi
rustup target list --installed | grep -qx "$target" || rustup target add "$target" ||
  { echo "test-aarch64.sh: cannot add the Rust target $target" >&2; exit 1; }

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER=qemu-aarch64
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
export CORO_TEST_RUNNER=$CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER

echo "test-aarch64.sh: unit and integration tests under $CORO_TEST_RUNNER; doctests run natively (scripts/test.sh)"
exec cargo test --no-fail-fast --target "$target" -p coro-runtime -p coro-sync -p coro-net --lib --tests "$@"
