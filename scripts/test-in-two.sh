#!/usr/bin/env bash
# Builds the tests once, then runs them in two test processes at the same time: the tests that start
# servers and call them over HTTP (the modules `server_tests` names) in one, every other module's in the other.
# Each goes through scripts/test-digest.sh with a log of its own; the second's output is shown when it
# ends. Exits non-zero when either fails.
#
#   scripts/test-in-two.sh swift [--skip NAME ...]
#
# Measured (FailClosedTests' move test on PostgreSQL beside the bundle-import and migrator tests, 2 cores):
# in one process 137 s, in two processes at once 14 s; alone 8 s.
#
# Why two: a process's Swift tasks share one cooperative thread per core, two on the CI machine. A
# synchronous test (most of the store's, bundles' and migrator's: SQLite through GRDB, whole imports)
# holds its thread until it ends, so two of them at once left an in-process server's request handlers no
# thread at all: a push waited over 180 s for one and the client timed out (a clean CI run, 4e79a58,
# FailClosedTests on PostgreSQL). A server runs in a process of its own in the field; here the kernel
# shares the cores between the two processes, and the server tests' threads are never all held by tests
# that do not await.
set -uo pipefail

[ "$#" -ge 1 ] || { echo "usage: $0 SWIFT [--skip NAME ...]" >&2; exit 2; }
swift="$1"; shift
# Modules whose tests run servers (in process, or python3 scripted ones) and clients against them.
server_tests='^(OutpostServerTests|OutpostSyncTests|OutpostTests|WorkspaceTests)\.'

"$swift" build --build-tests || exit $?
# Plain text, as `swift test` prints it to a pipe: the digest looks for lines that begin with ✘.
export NO_COLOR=1
# The test binary `swift test` runs, called directly: two `swift test` at once wait for each other
# (SwiftPM holds a lock on .build for the whole run).
bin="$("$swift" build --show-bin-path)" || exit $?
tests="$bin/$(ls "$bin" | grep -m1 'PackageTests\.xctest$')"
[ -x "$tests" ] || { echo "test-in-two: no test binary in $bin" >&2; exit 1; }

others_log=".build/test-output-others.log"
TEST_DIGEST_LOG="$others_log" scripts/test-digest.sh "$tests" --testing-library swift-testing --skip "$server_tests" "$@" \
  > .build/test-console-others.log 2>&1 &
others=$!

TEST_DIGEST_LOG=".build/test-output.log" scripts/test-digest.sh "$tests" --testing-library swift-testing --filter "$server_tests" "$@"
servers=$?

wait "$others"
status=$?
echo
echo "== the other modules' tests (their own process; whole output in $others_log)"
tail -n 40 .build/test-console-others.log
[ "$servers" -ne 0 ] && exit "$servers"
exit "$status"
