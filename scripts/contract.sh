#!/usr/bin/env bash
# `make contract`: schemathesis (PyPI, in a virtual environment under .build) against a seeded
# `outpost serve` on each backend, every check, a fixed seed: the server must accept every request
# schemas/sync-api.yaml allows and refuse every one it does not, and answer only as it documents.
# Run inside scripts/with-test-postgres.sh (for the PostgreSQL backend); `outpost` already built.
#
#   scripts/contract.sh BIN_DIR [EXAMPLES]
set -euo pipefail
cd "$(dirname "$0")/.."
bin="$1/outpost"
examples="${2:-30}"
schemathesis_version=4.32.5
venv=.build/contract-venv
if ! "$venv/bin/st" --version 2>/dev/null | grep -q "$schemathesis_version"; then
  echo "contract: installing schemathesis $schemathesis_version into $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "schemathesis==$schemathesis_version"
fi
work="$(mktemp -d)"
server=""
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
token="contract-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
admin_token="contract-admin-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
cat > "$work/seed.json" <<SEED
{"projects": [{"id": "a0000000-0000-4000-8000-00000000000a", "name": "Maple Street", "address": "12 Maple Street"}],
 "members": [{"userID": "a11ce000-0000-4000-8000-000000000001", "name": "Alice", "role": "owner",
              "projects": ["a0000000-0000-4000-8000-00000000000a"]},
             {"userID": "0e000000-0000-4000-8000-000000000001", "name": "Operator", "projects": []}],
 "tokens": [{"userID": "a11ce000-0000-4000-8000-000000000001", "token": "$token"},
            {"userID": "0e000000-0000-4000-8000-000000000001", "token": "$admin_token", "admin": true}]}
SEED
failed=0
for backend in sqlite postgres; do
  if [ "$backend" = sqlite ]; then
    target=(--db "$work/server.sqlite")
  else
    [ -n "${OUTPOST_TEST_POSTGRES_URL:-}" ] || { echo "contract: no PostgreSQL (run inside scripts/with-test-postgres.sh)" >&2; exit 1; }
    target=(--postgres "$OUTPOST_TEST_POSTGRES_URL" --media "$work/media")
  fi
  "$bin" serve "${target[@]}" --port 0 --seed "$work/seed.json" --log-level error > "$work/serve.out" 2> "$work/serve.err" &
  server=$!
  for _ in $(seq 1 300); do grep -q "listening on" "$work/serve.out" && break; sleep 0.1; done
  url="$(sed -n 's/^listening on //p' "$work/serve.out")"
  [ -n "$url" ] || { echo "contract: the $backend server did not start" >&2; cat "$work/serve.err" >&2; exit 1; }
  echo "== contract, $backend backend: schemathesis against $url"
  # 413 is a documented answer to a request of the right form past a server limit (a chunk larger than
  # the server takes), which no schema keyword can state.
  if ! "$venv/bin/st" --config-file scripts/schemathesis.toml run schemas/sync-api.yaml --url "$url" \
      --exclude-path-regex '^/admin/' \
      -H "Authorization: Bearer $token" --checks all --seed 1 --max-examples "$examples" --no-color; then
    failed=1
  fi
  # The admin API and the metrics again with an admin token (the member's token above is refused 403 there).
  echo "== contract, $backend backend: the admin API with an admin token"
  if ! "$venv/bin/st" --config-file scripts/schemathesis.toml run schemas/sync-api.yaml --url "$url" \
      --include-path-regex '^/(admin/|metrics$)' \
      -H "Authorization: Bearer $admin_token" --checks all --seed 1 --max-examples "$examples" --no-color; then
    failed=1
  fi
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
done
exit "$failed"
