#!/usr/bin/env bash
# Runs make's stages one after another, as `make test` does, and prints at
# its end how long each took (and each test package of e2e, from e2e.log),
# whether the run passed or not: where CI's time goes is read off every run.
set -uo pipefail
declare -a names secs results
rc=0
for stage in "$@"; do
  start=$SECONDS
  ${MAKE:-make} --no-print-directory "$stage"
  rc=$?
  names+=("$stage"); secs+=($((SECONDS - start)))
  if [ $rc -ne 0 ]; then results+=(FAIL); break; fi
  results+=(ok)
done
echo
echo "stage times (make test):"
total=0
for i in "${!names[@]}"; do
  printf '  %-12s %6ss  %s\n' "${names[$i]}" "${secs[$i]}" "${results[$i]}"
  total=$((total + secs[i]))
done
if [ -f e2e.log ] && [[ " $* " == *" e2e "* ]]; then
  # go test's package lines: "ok  <tab>pkg<tab>12.3s", "FAIL<tab>pkg<tab>12.3s".
  grep -E '^(ok|FAIL)[[:space:]]+[a-z]' e2e.log | awk '{printf "    %-48s %s %s\n", $2, $1, $3}'
fi
printf '  %-12s %6ss\n' total "$total"
exit $rc
