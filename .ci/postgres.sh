# Sourced by .ci/run (and usable by hand: `source .ci/postgres.sh`): installs PostgreSQL
# from Debian's packages when missing, starts a throwaway server on loopback in a temp
# directory, exports ASSENT_TEST_POSTGRES_URL for the cross-backend tests, and stops and
# deletes the server when the sourcing shell exits.

assent_pg_bin() {
    local dir
    for dir in /usr/lib/postgresql/*/bin; do
        [[ -x "$dir/initdb" ]] && { echo "$dir"; return 0; }
    done
    return 1
}

assent_pg_start() {
    local sudo_cmd=() bin dir port user
    [[ "$(id -u)" == "0" ]] || sudo_cmd=(sudo)
    if ! bin="$(assent_pg_bin)"; then
        "${sudo_cmd[@]}" apt-get update
        "${sudo_cmd[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql
        bin="$(assent_pg_bin)"
    fi
    # PostgreSQL refuses to run as root: run it as the package's own user then.
    user="$(id -un)"
    [[ "$(id -u)" == "0" ]] && user=postgres
    dir="$(mktemp -d /tmp/assent-pg.XXXXXX)"
    chown "$user" "$dir"
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null || echo 54329)"
    as_pg() { if [[ "$user" == "$(id -un)" ]]; then "$@"; else runuser -u "$user" -- "$@"; fi; }
    as_pg "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --no-locale --no-sync >/dev/null
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w \
        -o "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=off -c max_connections=200" start >/dev/null
    "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres assent
    export ASSENT_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/assent"
    ASSENT_PG_DIR="$dir"
    ASSENT_PG_BIN="$bin"
    ASSENT_PG_USER="$user"
    trap assent_pg_stop EXIT
    echo "PostgreSQL for tests at $ASSENT_TEST_POSTGRES_URL" >&2
}

assent_pg_stop() {
    [[ -n "${ASSENT_PG_DIR:-}" ]] || return 0
    if [[ "$ASSENT_PG_USER" == "$(id -un)" ]]; then
        "$ASSENT_PG_BIN/pg_ctl" -D "$ASSENT_PG_DIR/data" -m immediate stop >/dev/null || true
    else
        runuser -u "$ASSENT_PG_USER" -- "$ASSENT_PG_BIN/pg_ctl" -D "$ASSENT_PG_DIR/data" -m immediate stop >/dev/null || true
    fi
    rm -rf "$ASSENT_PG_DIR"
    ASSENT_PG_DIR=""
}

assent_pg_start
