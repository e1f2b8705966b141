#!/bin/sh
# Initialise once (the official image's variables), then run `postgres …` on the data directory.
set -eu
if [ ! -s "$PGDATA/PG_VERSION" ]; then
    pwfile=$(mktemp)
    printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
    initdb -D "$PGDATA" -U "$POSTGRES_USER" --pwfile="$pwfile" --auth=scram-sha-256 >/dev/null
    rm -f "$pwfile"
    pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -k /tmp" -w start >/dev/null
    PGPASSWORD="$POSTGRES_PASSWORD" psql -h /tmp -U "$POSTGRES_USER" -d postgres -c "CREATE DATABASE \"$POSTGRES_DB\"" >/dev/null
    pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
fi
[ "${1:-}" = postgres ] && shift
exec postgres -D "$PGDATA" -k /tmp "$@"
