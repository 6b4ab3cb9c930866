#!/usr/bin/env bash
# README's test command: installs the system tools the tests drive (Debian
# packages) when they are missing, then runs the whole test suite: every
# test binary of every workspace crate, with every cargo feature on (tests
# of a feature declare it in `required-features`), through to the end
# (`--no-fail-fast`): every failure is reported, and the exit status is
# non-zero if any test failed.
#
# A test never passes silently because a tool is absent: the tests that use a
# tool fail with a message naming it, and this script installs every tool
# listed below first. Extra arguments go to `cargo test`.
#
# The benches' peers (tokio, may, criterion) are not built: the benches
# crate's library has no tests, and its bench targets are built only by
# `cargo bench` and linted by CI (`cargo clippy --workspace --all-targets`
# in .ci/run). tests/workspace.rs checks this stays so.
set -euo pipefail
cd "$(dirname "$0")/.."

# command the tests run -> Debian package that provides it
tools=(
  "socat:socat"          # net/tests/backdoor.rs: the back door's client
  "setpriv:util-linux"   # net/tests/backdoor.rs: a client running as another user
  "prlimit:util-linux"   # mail-relay's tests under a low open-file limit
  "chromium:chromium"    # profile/tests/cli.rs: renders the HTML report headless
  "swaks:swaks"          # mail-relay's client tests
  "python3:python3"      # mail-relay's smtplib tests (smtplib is in the standard library)
  "curl:curl"            # tests/hyper.rs: the HTTP client of the hyper-on-coro server
  "dnsmasq:dnsmasq-base" # net/tests/dns_dnsmasq.rs, mail-relay's MX tests: the DNS server
  "openssl:openssl"      # mail-relay's DKIM test: makes the keys
  "cc:gcc"               # mail-relay's storage fault test: builds its LD_PRELOAD shim
  "flock:util-linux"     # mail-relay's local-user tests (setpriv too): another process holding the spool's lock
  "redis-server:redis-server" # tests/tokio_bridge: the redis server of the redis client's tests
)

missing=()
for entry in "${tools[@]}"; do
  cmd=${entry%%:*} pkg=${entry#*:}
  command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done
# tests/postgres.rs starts its own PostgreSQL server (initdb, postgres as
# the postgres user); Debian keeps them in /usr/lib/postgresql/*/bin.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
if ((${#missing[@]})); then
  echo "test.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# dkimpy (mail-relay's DKIM test verifies every signature with it): Debian's
# python3-dkim, for /usr/bin/python3 when python3 is another interpreter.
if ! python3 -c 'import dkim' 2>/dev/null && ! /usr/bin/python3 -c 'import dkim' 2>/dev/null; then
  echo "test.sh: installing python3-dkim (dkimpy)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends python3-dkim >/dev/null
fi

# Net::SSLeay (swaks's TLS, for mail-relay's submission tests): Debian's
# libnet-ssleay-perl.
if ! perl -MNet::SSLeay -e1 2>/dev/null; then
  echo "test.sh: installing libnet-ssleay-perl (swaks's TLS)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends libnet-ssleay-perl >/dev/null
fi

# Postfix's tools (smtp-source for the relay's benchmark, smtp-sink for its
# delivery tests): the postfix package needs debconf answers, which the
# installer gives.
bash scripts/install-postfix.sh

exec cargo test --workspace --all-features --no-fail-fast "$@"
