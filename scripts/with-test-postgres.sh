#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL cluster: initdb in a temp folder, started on a free
# local port, its URL in OUTPOST_TEST_POSTGRES_URL; stopped and removed when the command ends,
# whatever its outcome. Used by `make test` (and `make bench`); needs Debian's `postgresql` package.
#
#   scripts/with-test-postgres.sh swift test --filter OutpostServerTests
#
# initdb refuses to run as root, so as root the cluster belongs to the `postgres` system user.
# OUTPOST_TEST_POSTGRES_DURABLE=1 keeps fsync on (for benchmarks); tests turn it off for speed.
set -euo pipefail

[ "$#" -ge 1 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

bindir="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
if [ -z "$bindir" ] || [ ! -x "$bindir/initdb" ]; then
  echo "with-test-postgres: no PostgreSQL server found under /usr/lib/postgresql; install Debian's 'postgresql' package (make test does)" >&2
  exit 1
fi

as_owner() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

dir="$(mktemp -d "${TMPDIR:-/tmp}/outpost-postgres.XXXXXX")"
[ "$(id -u)" = 0 ] && chown postgres: "$dir"
started=""
cleanup() {
  status=$?
  if [ -n "$started" ]; then
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free port: bind port 0 and read back what the kernel chose.
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"

as_owner "$bindir/initdb" -D "$dir/data" -U outpost -A trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 || {
  cat "$dir/initdb.log" >&2; exit 1; }
fsync="off"
[ "${OUTPOST_TEST_POSTGRES_DURABLE:-0}" = 1 ] && fsync="on"
# Swift Testing runs the server tests at once, each PostgreSQL server with a pool of up to 20
# connections (postgres-nio's default): at 200, a full run met "too many clients already" once the
# suite had grown by three PostgreSQL tests.
options="-p $port -c listen_addresses=127.0.0.1 -k $dir -c fsync=$fsync -c full_page_writes=$fsync -c max_connections=600"
started=1
as_owner "$bindir/pg_ctl" -D "$dir/data" -o "$options" -l "$dir/server.log" -w -t 60 start >/dev/null || {
  cat "$dir/server.log" >&2; exit 1; }
as_owner "$bindir/createdb" -h 127.0.0.1 -p "$port" -U outpost outpost

export OUTPOST_TEST_POSTGRES_URL="postgres://outpost@127.0.0.1:$port/outpost?sslmode=disable"
echo "with-test-postgres: PostgreSQL $("$bindir/postgres" --version | awk '{print $3}') on 127.0.0.1:$port (removed afterwards)"
set +e
"$@"
status=$?
set -e
exit "$status"
