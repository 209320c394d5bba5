#!/usr/bin/env bash
# Runs a test command with its output shown as usual and kept in a log; when it fails, prints at the
# very end what a reader of the last lines needs: the fatal error's message, the crashed thread's
# frames and the failed tests. Why: CI keeps only the tail of its output, and a test process that
# crashed ends with its registers and loaded images, far below the message that names the cause.
#
#   scripts/test-digest.sh swift test
set -uo pipefail

[ "$#" -ge 1 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }
log="${TEST_DIGEST_LOG:-.build/test-output.log}"
mkdir -p "$(dirname "$log")"
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
if [ "$status" -ne 0 ]; then
  echo
  echo "== test digest (exit $status; whole output in $log)"
  grep -a -E "Fatal error|Precondition failed|Assertion failed|Program crashed|exited with unexpected signal" "$log" | head -n 10
  awk '/ crashed:$/ { on = 1; n = 0 } on && n < 40 { print; n++ } /^Registers:/ { on = 0 }' "$log" | head -n 60
  grep -a -E "^✘ Test .* failed|^✘ Test .* recorded an issue" "$log" | head -n 30
  # A request a test saw go unanswered (TestServer.reportingAStall): what the server was doing then.
  grep -a "^stall: " "$log" | head -n 40
fi
exit "$status"
