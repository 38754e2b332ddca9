#!/usr/bin/env bash
# Puts promtool, for the chart's alert tests (deploy/alerts_test.go), into
# the directory given: Debian's prometheus package is downloaded and only
# its promtool extracted (nothing is installed, no daemon starts). Building
# promtool from source cost minutes of a cold CI run on two cores.
set -euo pipefail
out=${1:?usage: fetch.sh DIR}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
if ! apt-get download prometheus >/dev/null 2>&1; then
  # A fresh machine has no package lists yet.
  apt-get update -qq
  apt-get download prometheus >/dev/null
fi
dpkg -x prometheus_*.deb x
mkdir -p "$out"
install -m 0755 x/usr/bin/promtool "$out/promtool.tmp$$"
mv "$out/promtool.tmp$$" "$out/promtool"
"$out/promtool" --version 2>&1 | head -1
