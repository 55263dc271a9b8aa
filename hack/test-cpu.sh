#!/usr/bin/env bash
# Runs go test with every test binary under /usr/bin/time and prints, at the end, the CPU
# seconds (user + system of the binary and of every process it started and waited for: JVMs,
# servers, lockstep runs) and the wall seconds of each package's test binary, most CPU first.
# The suite is CPU-bound on 2 cores (hack/cold-run.sh measured the cores 95% busy): this says
# where the CPU goes. Usage: hack/test-cpu.sh [go test flags and packages]
# (default: -race -count=1 -timeout 45m ./...; give -timeout when naming packages: go test's is 10m;
# the e2e suite: hack/test-cpu.sh -tags e2e -race -count=1 -timeout 45m ./e2e/)
set -euo pipefail
if [ "${1:-}" = --exec ]; then # how go test runs each binary: --exec LOG BINARY ARGS...
  log=$2; shift 2
  exec /usr/bin/time -a -o "$log" -f "%U %S %e $(basename "$1")" "$@"
fi
self=$(readlink -f "$0")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
[ $# -gt 0 ] || set -- -race -count=1 -timeout 45m ./...
rc=0
go test -exec "$self --exec $log" "$@" || rc=$?
echo "cpu-s  wall-s  test binary"
awk '!/^Command/ { printf "%6.0f %7.0f  %s\n", $1 + $2, $3, $4 }' "$log" | sort -rn
exit $rc
