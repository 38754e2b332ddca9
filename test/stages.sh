#!/usr/bin/env bash
# `make test`: every stage CI gates on, in three lanes side by side, and at
# the end a table of what ran when and for how long.
#
# The end-to-end suites mostly wait (TTLs, grace periods, leases, a
# kubelet's and the controllers' resyncs): one test process keeps about a
# third of one core of this machine's two busy. So they run side by side:
#   node    the real node (test/node), which owns the host's CNI and
#           kubelet paths and so runs alone in its lane; the longest, and
#           the one whose timings are real (a kubelet gives a container
#           2 s to exit), so it runs a little above normal priority;
#   e2e     every other end-to-end package, the largest (test/e2e) cut
#           into shards by the weights in test/weights, each shard a test
#           process with a bed of its own (its own etcd and API server), as
#           jobs that CAPO_TEST_WORKERS workers (default 3) take, longest
#           first;
#   checks  the unit tests, at the lowest priority so that they take
#           what the suites leave idle (the tests themselves run at normal
#           priority).
# First a build phase: the programs the tests run, each set in one go build
# (test/prebuild), the lint and vuln tools, the unit tests' packages
# compiled for -race, then lint and vuln themselves; then the lanes, which
# compile little more (each test binary, once). A stage goes on after a
# failed one where it does not need it; the run fails if any stage failed,
# and prints what failed.
set -uo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
logs=${CAPO_TEST_LOGS:-test-logs}
workers=${CAPO_TEST_WORKERS:-3}
shards=${CAPO_E2E_SHARDS:-4}
timeout=${E2E_TIMEOUT:-60m}
rm -rf "$logs" && mkdir -p "$logs/bin"
logs=$(cd "$logs" && pwd)
results=$logs/results # lane stage start secs result
t0=$SECONDS

# stage LANE NAME NICE CMD...: runs CMD at niceness NICE, its output in
# $logs/NAME.log, and records it.
stage() {
  local lane=$1 name=$2 nice=$3; shift 3
  local start=$((SECONDS - t0)) rc
  echo "[$lane] $name: started at ${start}s"
  # A function of this script runs in a bash of its own under nice.
  declare -F "$1" >/dev/null && set -- bash -c '"$@"' _ "$@"
  # The CPU time of the stage and all it started (user + system, seconds).
  local TIMEFORMAT='%U %S' cpu
  cpu=$({ time nice -n "$nice" "$@" >"$logs/$name.log" 2>&1; } 2>&1)
  rc=$?
  local secs=$((SECONDS - t0 - start)) result=ok
  [ $rc -ne 0 ] && result=FAIL
  cpu=$(awk '{ printf "%d", $1 + $2 }' <<<"$cpu")
  echo "$lane $name $start $secs $result $cpu" >>"$results"
  echo "[$lane] $name: $result in ${secs}s"
  return $rc
}

# The robustness suite keeps each run's processes' logs and history here.
export CAPO_ROBUST_LOGS=${CAPO_ROBUST_LOGS:-$logs/robust-runs}
export logs timeout

skipped() { echo "$1 $2 $((SECONDS - t0)) 0 skipped 0" >>"$results"; }

# testbin PKG: the package's test binary, linked once (a lock keeps two
# jobs of one package from linking it twice).
testbin() {
  local pkg=$1 bin
  bin=$logs/bin/$(echo "${pkg#./}" | tr / -).test
  flock "$bin.lock" bash -c '[ -x "$1" ] || go test -c -o "$1" "$2"' _ "$bin" "$pkg" >&2 || return 1
  echo "$bin"
}

# gotest NAME PKG [RUN]: the package's tests (those RUN matches), in the
# package's directory as go test runs them; a line as go test prints it
# (ok or FAIL, the package, the time) closes its log.
gotest() {
  local name=$1 pkg=$2 run=${3:-.} bin start rc ms
  bin=$(testbin "$pkg") || return 1
  start=${EPOCHREALTIME/./}
  (cd "$pkg" && "$bin" -test.v -test.count=1 -test.timeout="$timeout" -test.run "$run")
  rc=$?
  ms=$(((${EPOCHREALTIME/./} - start) / 1000))
  printf '%s\t%s\t%d.%03ds\n' "$([ $rc = 0 ] && echo ok || echo FAIL)" "github.com/capo-net/capo/${pkg#./}$([ "$run" = . ] || echo " ($name)")" $((ms / 1000)) $((ms % 1000))
  return $rc
}

export -f testbin gotest

# shard PKG N: N run patterns that cut PKG's top-level tests into N parts
# of about equal weight (test/weights; a test not listed weighs 10 s),
# heaviest first, each to the lightest part so far.
shard() {
  local pkg=$1 n=$2 bin
  bin=$(testbin "$pkg") || return 1
  (cd "$pkg" && "$bin" -test.list '.*') | grep -E '^(Test|Example)' |
    awk -v n="$n" -v pkg="${pkg#./}" '
      FNR == NR { if ($1 == pkg) w[$2] = $3; next }
      { t[$1] = ($1 in w) ? w[$1] : 10 }
      END {
        for (k in t) names[++m] = k
        for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
          if (t[names[j]] > t[names[i]] || (t[names[j]] == t[names[i]] && names[j] < names[i])) { x = names[i]; names[i] = names[j]; names[j] = x }
        for (i = 1; i <= m; i++) {
          b = 1; for (s = 2; s <= n; s++) if (load[s] < load[b]) b = s
          load[b] += t[names[i]]; part[b] = part[b] (part[b] == "" ? "" : "|") names[i]
        }
        for (s = 1; s <= n; s++) if (part[s] != "") printf "%d ^(%s)$\n", load[s], part[s]
      }' test/weights -
}

# The e2e lane's jobs, one a line: weight, name, package, run pattern:
# test/e2e's shards, and every other package of test/ with tests but the
# real node's, whole, each weighing the sum of its tests' weights.
e2e_jobs() {
  local i=0 w run pkg
  while read -r w run; do
    i=$((i + 1))
    echo "$w e2e-$i ./test/e2e $run"
  done < <(shard ./test/e2e "$shards")
  for pkg in $(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./test/...); do
    pkg=./${pkg#"$PWD"/}
    case $pkg in ./test/e2e | ./test/node) continue ;; esac
    w=$(awk -v p="${pkg#./}" '$1 == p { s += $3 } END { print s + 10 }' test/weights)
    echo "$w $(echo "${pkg#./test/}" | tr / -) $pkg ."
  done
}

# worker N: takes the next job off the queue until none is left.
worker() {
  local job w name pkg run
  while :; do
    job=$(flock "$logs/queue.lock" bash -c 'head -n 1 "$1"; sed -i 1d "$1"' _ "$logs/queue")
    [ -n "$job" ] || return 0
    read -r w name pkg run <<<"$job"
    stage e2e "$name" 0 gotest "$name" "$pkg" "$run"
    grep -E -- '^(--- FAIL|FAIL|panic)' "$logs/$name.log" | sed "s/^/[e2e] $name: /"
  done
}

checks_lane() {
  stage checks unit 19 $MAKE --no-print-directory unit UNIT_EXEC='nice -n -19'
}

node_lane() {
  if [ -f "$logs/node.built" ]; then
    stage node node -5 gotest node ./test/node
    grep -E -- '^(--- FAIL|FAIL|panic)' "$logs/node.log" | sed 's/^/[node] /'
  else
    skipped node node
  fi
}

e2e_lane() {
  if [ ! -f "$logs/extra.built" ]; then
    skipped e2e e2e
    return
  fi
  e2e_jobs | sort -rn >"$logs/queue"
  cp "$logs/queue" "$logs/jobs"
  # Only the workers: a bare wait would reap the other lanes too, which
  # the script waits for by their pids.
  local pids=()
  for _ in $(seq "$workers"); do
    worker &
    pids+=($!)
  done
  wait "${pids[@]}"
}

# The build phase: everything the lanes compile, before any test runs (a
# compile beside a test is what starves it); warm, each is a look at the
# cache. The servers first: the node's programs and the rest reuse what
# they compile.
if stage build servers 0 go run ./test/prebuild servers; then
  { stage build prebuild-node 0 go run ./test/prebuild node && touch "$logs/node.built"; } &
  { stage build prebuild-extra 0 go run ./test/prebuild extra && touch "$logs/extra.built"; } &
fi
# lint and vuln here too: on a fresh machine their analyses take minutes
# and gigabytes, which beside the real node's tests would move the memory
# its kubelet's eviction thresholds are set by.
{
  stage build tools 0 $MAKE --no-print-directory tools unit-deps
  stage build lint 0 $MAKE --no-print-directory lint
  stage build vuln 0 $MAKE --no-print-directory vuln
} &
wait

checks_lane &
checks=$!
node_lane &
node=$!
e2e_lane
wait $node $checks
wall=$((SECONDS - t0))
rc=0
awk '$5 == "FAIL" { f = 1 } END { exit !f }' "$results" && rc=1

# What failed, at the end where it is seen.
while read -r lane name _ _ result _; do
  [ "$result" = FAIL ] || continue
  echo
  echo "=== $name failed ($logs/$name.log); its failures:"
  grep -E -e '--- FAIL|^FAIL|^panic|_test.go:[0-9]+:|Error|error:|\*\*\*|^make' "$logs/$name.log" | tail -n 150
done <"$results"

echo
echo "stage times (make test):"
printf '  %-7s %-15s %7s %7s %7s  %s\n' lane stage start time cpu result
sort -k3 -n "$results" | while read -r lane name start secs result cpu; do
  printf '  %-7s %-15s %6ss %6ss %6ss  %s\n' "$lane" "$name" "$start" "$secs" "$cpu" "$result"
done
# The package lines gotest wrote: "ok<tab>pkg (job)<tab>12.3s".
cat "$logs"/*.log 2>/dev/null | grep -E '^(ok|FAIL)	github' | awk -F'\t' '{printf "    %-58s %s %s\n", $2, $1, $3}'
printf '  %-23s %6ss\n' wall "$wall"
exit $rc
