#!/usr/bin/env bash
# `make test`: every stage CI gates on, one after another, and at the end a
# table of what ran when and for how long.
#
# One at a time: on two cores the end-to-end suites keep both busy (each
# bed runs its own etcd, kube-apiserver and capo's processes; the real
# node a kubelet, containerd and felix), so stages side by side only slow
# each other down, and a kubelet whose pods are starved of CPU ends an
# eviction otherwise than the test's pod chose (it gives a container 2 s
# to exit on SIGTERM). What a run builds is built once, in one go build per
# set of programs (test/prebuild), just before the first stage that needs
# it. A stage goes on after a failed one where it does not need it; the
# run fails if any stage failed, and prints what failed.
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
logs=${CAPO_TEST_LOGS:-test-logs}
rm -rf "$logs" && mkdir -p "$logs"
results=$logs/results # lane stage start secs result
t0=$SECONDS

# stage LANE NAME NICE CMD...: runs CMD at niceness NICE, its output in
# $logs/NAME.log (the end-to-end stages' also on stdout, filtered), and
# records it.
stage() {
  local lane=$1 name=$2 nice=$3; shift 3
  local start=$((SECONDS - t0)) rc
  echo "[$lane] $name: started at ${start}s"
  if [ "$name" = e2e ] || [ "$name" = e2e-node ]; then
    nice -n "$nice" "$@" 2>&1 | tee "$logs/$name.log" | grep --line-buffered -E '^(=== RUN|--- |\s+--- |PASS|FAIL|ok|panic)|_test.go:|testbed:|nodebed:|calicosuite:'
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

rc=0
stage checks lint 0 $MAKE --no-print-directory lint
stage checks vuln 0 $MAKE --no-print-directory vuln
stage checks unit 0 $MAKE --no-print-directory unit
stage checks fuzz-short 0 $MAKE --no-print-directory fuzz-short
if stage e2e servers 0 go run ./test/prebuild servers extra; then
  stage e2e e2e 0 $MAKE --no-print-directory e2e-core
else
  skipped e2e e2e
fi
if stage node prebuild-node 0 go run ./test/prebuild node; then
  stage node e2e-node 0 $MAKE --no-print-directory e2e-node
else
  skipped node e2e-node
fi
wall=$((SECONDS - t0))
grep -q ' FAIL$' "$results" && rc=1

# What failed, at the end where it is seen.
while read -r lane name _ _ result; do
  [ "$result" = FAIL ] || continue
  echo
  echo "=== $name failed ($logs/$name.log); its failures:"
  grep -E -e '--- FAIL|^FAIL|^panic|_test.go:[0-9]+:|Error|error:|\*\*\*|^make' "$logs/$name.log" | tail -n 150
done <"$results"

echo
echo "stage times (make test):"
printf '  %-7s %-15s %7s %7s  %s\n' lane stage start time result
sort -k3 -n "$results" | while read -r lane name start secs result; do
  printf '  %-7s %-15s %6ss %6ss  %s\n' "$lane" "$name" "$start" "$secs" "$result"
done
# go test's package lines: "ok  <tab>pkg<tab>12.3s", "FAIL<tab>pkg<tab>12.3s".
cat "$logs"/e2e.log "$logs"/e2e-node.log 2>/dev/null | grep -E '^(ok|FAIL)[[:space:]]+[a-z]' | awk '{printf "    %-48s %s %s\n", $2, $1, $3}'
printf '  %-23s %6ss\n' wall "$wall"
exit $rc
