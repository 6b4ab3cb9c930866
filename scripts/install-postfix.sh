#!/usr/bin/env bash
# Installs Postfix from Debian's packages, for its tools: `smtp-sink` (the
# upstream of the mail relay's delivery tests), `smtp-source` and Postfix
# itself (the relay's benchmark peer, examples/mail-relay/bench/). Does
# nothing when they are there already.
#
#   bash scripts/install-postfix.sh
#
# The postfix package asks two questions at install time. They are answered
# beforehand through debconf, so the install never waits for a terminal:
#   main_mailer_type  "Local only": no mail leaves the machine, and the
#                     system's own Postfix listens on loopback only (the
#                     tests and the benchmark start their own instances)
#   mailname          a name under the reserved .test domain
# Needs root (apt-get); scripts/test.sh runs it when smtp-source is missing.
set -euo pipefail

if command -v smtp-source >/dev/null 2>&1 && command -v smtp-sink >/dev/null 2>&1 &&
  command -v postfix >/dev/null 2>&1; then
  exit 0
fi

export DEBIAN_FRONTEND=noninteractive
if ! command -v debconf-set-selections >/dev/null 2>&1; then
  echo "install-postfix: debconf-set-selections is missing (package debconf); cannot answer postfix's questions" >&2
  exit 1
fi
debconf-set-selections <<'EOF'
postfix postfix/main_mailer_type select Local only
postfix postfix/mailname string coro.test
EOF
echo "install-postfix: installing postfix (smtp-source, smtp-sink)"
apt-get update -qq
apt-get install -y -qq --no-install-recommends postfix >/dev/null

for tool in smtp-source smtp-sink postfix; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "install-postfix: postfix is installed but $tool is not on PATH" >&2
    exit 1
  }
done
