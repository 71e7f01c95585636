#!/usr/bin/env bash
# Runs every fuzz target of the module (each func FuzzXxx of a _test.go
# file) for FUZZTIME (a Go duration, or Nx for N inputs), one after the
# other. An input that fails a target is written by Go to the package's
# testdata/fuzz/FuzzXxx/, where the package's ordinary test run (make test)
# replays it as a seed from then on: commit it with the fix. Exits non-zero
# when a target failed, after running the others.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-1m}

failed=()
while read -r pkg dir; do
	names=$(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //' | sort -u || true)
	for name in $names; do
		echo "fuzz: $name ($pkg) for $FUZZTIME"
		if ! "$GO" test -run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME" "$pkg"; then
			failed+=("$name ($pkg)")
		fi
	done
done < <("$GO" list -f '{{.ImportPath}} {{.Dir}}' ./...)

if [ ${#failed[@]} -gt 0 ]; then
	echo "fuzz: failed: ${failed[*]}; the failing inputs are in the packages' testdata/fuzz/" >&2
	exit 1
fi
echo "fuzz: every target ran for $FUZZTIME without a failure"
