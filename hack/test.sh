#!/usr/bin/env bash
# make test's run: `go test "$@"` and, beside it when $E2E names a command, the e2e suite.
# The e2e suite's output follows the packages'. A failed run ends with every failed test's line,
# so that a log cut to its last lines (as CI shows it) still says what failed. Not `set -e`: a
# failed `go test` must not end the script before the e2e suite's output and that summary.
set -uo pipefail
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
e2e=
if [ -n "${E2E:-}" ]; then
	bash -c "$E2E" >"$out/e2e" 2>&1 &
	e2e=$!
fi
go test "$@" 2>&1 | tee "$out/pkgs"
rc=${PIPESTATUS[0]}
if [ -n "$e2e" ]; then
	wait "$e2e"
	e2erc=$?
	cat "$out/e2e"
	if [ "$e2erc" -ne 0 ]; then
		rc=$((rc ? rc : 1))
		echo "make test: the e2e suite failed (its output is above)"
	fi
fi
if [ "$rc" -ne 0 ]; then
	echo "make test: what failed:"
	grep -hE -- '^[[:space:]]*--- FAIL|^FAIL|^panic: |test timed out' "$out"/* | sed 's/^/  /'
fi
exit "$rc"
