#!/usr/bin/env bash
# `make test`: every stage CI gates on, in three lanes side by side, and at
# the end a table of what ran when and for how long.
#
# The end-to-end suites mostly wait (on servers, kubelets, leases, TTLs);
# the static checks and builds mostly compute. So, after the servers every
# bed needs are built (with every core):
#   e2e    the end-to-end packages but the real node's, one at a time;
#   node   the real node's programs built (nice), then its tests and
#          Calico's own CNI suite, a little above normal priority: a
#          kubelet's evictions give a container 2 s to exit on SIGTERM, and
#          a pod starved of CPU past that ends Failed where the test wants
#          the outcome its exit code chose;
#   checks the rest of the test programs built (nice), then lint, vuln, unit
#          and fuzz-short, their compiling at the lowest priority so that
#          they take only what the suites leave idle (unit tests themselves
#          run at normal priority: some of them time things).
# A lane goes on after a failed stage only where the next stage does not
# need it; the run fails if any stage failed, and prints what failed.
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
logs=${CAPO_TEST_LOGS:-test-logs}
rm -rf "$logs" && mkdir -p "$logs"
results=$logs/results # lane stage start secs result
t0=$SECONDS

# stage LANE NAME NICE CMD...: runs CMD at niceness NICE, its output in
# $logs/NAME.log (the e2e lane's also on stdout, filtered), and records it.
stage() {
  local lane=$1 name=$2 nice=$3; shift 3
  local start=$((SECONDS - t0)) rc
  echo "[$lane] $name: started at ${start}s"
  if [ "$lane" = e2e ] && [ "$name" != servers ]; then
    nice -n "$nice" "$@" 2>&1 | tee "$logs/$name.log" | grep --line-buffered -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok|panic)|_test.go:|testbed:|nodebed:'
    rc=${PIPESTATUS[0]}
  else
    nice -n "$nice" "$@" >"$logs/$name.log" 2>&1
    rc=$?
  fi
  local secs=$((SECONDS - t0 - start)) result=ok
  [ $rc -ne 0 ] && result=FAIL
  echo "$lane $name $start $secs $result" >>"$results"
  echo "[$lane] $name: $result in ${secs}s"
  return $rc
}

skipped() { echo "$1 $2 $((SECONDS - t0)) 0 skipped" >>"$results"; }

e2e_lane() {
  stage e2e e2e 0 $MAKE --no-print-directory e2e-core
}

node_lane() {
  if stage node prebuild-node 5 go run ./test/prebuild node; then
    stage node e2e-node -5 $MAKE --no-print-directory e2e-node
  else
    skipped node e2e-node
  fi
}

checks_lane() {
  stage checks prebuild-extra 15 go run ./test/prebuild extra
  stage checks lint 15 $MAKE --no-print-directory lint
  stage checks vuln 15 $MAKE --no-print-directory vuln
  # The test binaries run at normal priority (root may lower a niceness).
  stage checks unit 15 $MAKE --no-print-directory unit UNIT_EXEC='nice -n -15'
  stage checks fuzz-short 15 $MAKE --no-print-directory fuzz-short
}

rc=0
if stage e2e servers 0 go run ./test/prebuild servers; then
  e2e_lane &
  a=$!
  node_lane &
  b=$!
  checks_lane &
  c=$!
  for p in $a $b $c; do wait $p || rc=1; done
else
  rc=1
fi
wall=$((SECONDS - t0))
grep -q ' FAIL$' "$results" && rc=1

# What failed, from the lanes whose output was not on the screen.
while read -r lane name _ _ result; do
  [ "$result" = FAIL ] || continue
  echo
  echo "=== $name failed ($logs/$name.log); its failures:"
  grep -E -e '--- FAIL|^FAIL|^panic|_test.go:[0-9]+:|Error|error:|\*\*\*|^make' "$logs/$name.log" | tail -n 150
done <"$results"

echo
echo "stage times (make test; three lanes side by side):"
printf '  %-7s %-15s %7s %7s  %s\n' lane stage start time result
sort -k3 -n "$results" | while read -r lane name start secs result; do
  printf '  %-7s %-15s %6ss %6ss  %s\n' "$lane" "$name" "$start" "$secs" "$result"
done
# go test's package lines: "ok  <tab>pkg<tab>12.3s", "FAIL<tab>pkg<tab>12.3s".
cat "$logs"/e2e.log "$logs"/e2e-node.log 2>/dev/null | grep -E '^(ok|FAIL)[[:space:]]+[a-z]' | awk '{printf "    %-48s %s %s\n", $2, $1, $3}'
printf '  %-23s %6ss\n' wall "$wall"
exit $rc
