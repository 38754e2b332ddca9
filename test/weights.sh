#!/usr/bin/env bash
# weights.sh [LOGS]: test/weights anew from a make test's logs (default
# test-logs): each top-level test's time, by package, heaviest first.
set -euo pipefail
cd "$(dirname "$0")/.."
logs=${1:-test-logs}
{
  echo "# Each end-to-end test's weight, in seconds: how long it ran in a make test"
  echo "# of this tree's (test/stages.sh cuts test/e2e into shards of equal weight"
  echo "# and starts the heaviest jobs first). Refresh: test/weights.sh test-logs."
  for f in "$logs"/*.log; do
    # The line gotest closes a job's log with names its package.
    pkg=$(grep -E $'^(ok|FAIL)\tgithub.com/capo-net/capo/' "$f" | tail -n 1 | cut -f2 | sed -E 's#^github.com/capo-net/capo/##; s# \(.*##') || true
    [ -n "$pkg" ] || continue
    grep -E '^--- (PASS|FAIL|SKIP): ' "$f" | sed -E "s#^--- [A-Z]+: (\S+) \(([0-9.]+)s\).*#$pkg \1 \2#"
  done | awk '{ printf "%s %s %d\n", $1, $2, $3 + 0.5 }' | sort -k3,3rn -k1,2
} >test/weights.new
mv test/weights.new test/weights
