# The relay under measurement, for the memory benchmarks (idle.sh,
# memory.sh), which source this file from the repository's root.

# Sets MAIL_RELAY to the relay binary to measure: as given, or this tree's
# release build (built here, into $CARGO_TARGET_DIR or target/).
relay_binary() {
    [ -z "${MAIL_RELAY:-}" ] || return 0
    cargo build --release -q -p mail-relay
    MAIL_RELAY=${CARGO_TARGET_DIR:-$(pwd)/target}/release/mail-relay
}

# Starts $MAIL_RELAY with its spool, maildir, config (relay.toml), stdout
# (out) and log in the directory $1, on a free loopback port, with room for
# $2 sessions from one client; sets pid and addr (host:port). Exits, with
# what the relay said, when it does not start listening.
start_relay() {
    local dir=$1 sessions=$2
    cat > "$dir/relay.toml" <<TOML
listen = "127.0.0.1:0"
hostname = "relay.test"
spool_dir = "$dir/spool"
maildir = "$dir/maildir"
max_sessions = $((sessions + 100))
max_sessions_per_client = $((sessions + 100))
log_level = "warn"
$([ "$(id -u)" = 0 ] && echo 'run_as_root = true' || true)
TOML
    "$MAIL_RELAY" --config "$dir/relay.toml" > "$dir/out" 2> "$dir/log" &
    pid=$!
    for _ in $(seq 200); do grep -q listening "$dir/out" 2>/dev/null && break; sleep 0.05; done
    addr=$(sed -n 's/.*listening on \([^;]*\);.*/\1/p' "$dir/out")
    if [ -z "$addr" ]; then
        echo "$(basename "$0"): the relay did not start:" >&2
        cat "$dir/out" "$dir/log" >&2
        exit 1
    fi
}
