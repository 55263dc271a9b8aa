#!/usr/bin/env bash
# Compares the benchmarks of an earlier commit with this checkout's, side by side on one
# machine: both sides' test binaries are built first, then run in alternation (base, head,
# base, head, …) so that the machine's load falls on both alike, and benchstat sets the runs
# against each other. A machine busy with other work still makes every figure noisy: read the
# per-CPU-second metrics (ev/cpu-s, rows/cpu-s) before the wall-clock ones.
#
# Usage: hack/bench-compare.sh BASE [ROUNDS] [PACKAGE...]
#   BASE     a commit (the "before")
#   ROUNDS   runs per side (default 4)
#   PACKAGE  packages with benchmarks (default: the engine's, the checkpoint's and the controller's)
# Environment: BENCH (default .) selects benchmarks; BENCHTIME (default 1x for the end-to-end
# ones that size themselves, see each benchmark) is passed as -test.benchtime when set.
# Output: bin/bench-compare/{base,head}.txt and the benchstat table on stdout.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
base=${1:?usage: hack/bench-compare.sh BASE [ROUNDS] [PACKAGE...]}
rounds=${2:-4}
shift $(($# >= 2 ? 2 : 1))
pkgs=("$@")
[[ ${#pkgs[@]} -gt 0 ]] || pkgs=(./engine ./engine/stateful ./engine/state ./engine/codec ./engine/source ./engine/kafka ./engine/delta ./checkpoint ./controller)
out=$root/bin/bench-compare
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
mkdir -p "$out"
: >"$out/base.txt"
: >"$out/head.txt"

git -C "$root" worktree add -q --detach "$work/base" "$base"
build() { # SIDE TREE
  local side=$1 tree=$2 p
  for p in "${pkgs[@]}"; do
    if [[ ! -d $tree/$p ]]; then
      echo "[bench-compare] $side has no $p: skipped" >&2
      continue
    fi
    (cd "$tree" && go test -c -o "$work/$side/${p//\//_}.test" "$p") || return 1
  done
}
echo "[bench-compare] building $(git -C "$root" rev-parse --short "$base") and $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet || echo '+changes')" >&2
build base "$work/base"
build head "$root"

flags=(-test.run '^$' -test.bench "${BENCH:-.}" -test.benchmem -test.count 1)
[[ -n ${BENCHTIME:-} ]] && flags+=(-test.benchtime "$BENCHTIME")
for ((i = 1; i <= rounds; i++)); do
  for side in base head; do
    tree=$root
    [[ $side == base ]] && tree=$work/base
    for p in "${pkgs[@]}"; do
      bin=$work/$side/${p//\//_}.test
      [[ -x $bin ]] || continue
      echo "[bench-compare] round $i/$rounds: $side $p" >&2
      # A benchmark reads its testdata relative to its package, as go test runs it.
      (cd "$tree/$p" && "$bin" "${flags[@]}") >>"$out/$side.txt"
    done
  done
done
cd "$root"
go run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da "$out/base.txt" "$out/head.txt" | tee "$out/benchstat.txt"
