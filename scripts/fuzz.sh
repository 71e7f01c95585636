#!/usr/bin/env bash
# Runs every fuzz target of the module (each func FuzzXxx of a _test.go
# file) for FUZZTIME (a Go duration, or Nx for N inputs), one after the
# other. An input that fails a target is written by Go to the package's
# testdata/fuzz/FuzzXxx/, where the package's ordinary test run (make test)
# replays it as a seed from then on: commit it with the fix. Exits non-zero
# when a target failed, after running the others. A run that ends in
# "context deadline exceeded" without writing an input is Go's own race at
# the end of -fuzztime (go.dev/issue/75804, fixed in Go 1.27), not a failure.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-1m}

failed=()
out=$(mktemp)
trap 'rm -f "$out"' EXIT
while read -r pkg dir; do
	names=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
	for name in $names; do
		echo "fuzz: $name ($pkg) for $FUZZTIME"
		inputs=$(ls "$dir/testdata/fuzz/$name" 2>/dev/null || true)
		if ! "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg" 2>&1 | tee "$out"; then
			if [ "$(ls "$dir/testdata/fuzz/$name" 2>/dev/null || true)" = "$inputs" ] &&
				grep -qx '    context deadline exceeded' "$out"; then
				echo "fuzz: $name stopped by Go's race at the end of -fuzztime (go.dev/issue/75804); no failing input"
			else
				failed+=("$name ($pkg)")
			fi
		fi
	done
done < <("$GO" list -f '{{.ImportPath}} {{.Dir}}' ./...)

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: failed: ${failed[*]}; the failing inputs are in the packages' testdata/fuzz/" >&2
	exit 1
fi
echo "fuzz: every target ran for $FUZZTIME without a failure"
