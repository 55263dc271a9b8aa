#!/usr/bin/env bash
# Times a cold CI run: a fresh clone of this checkout's HEAD, then .ci/run with empty Go
# module, build, tool, Maven and npm caches, as on a clean machine (Debian packages already
# installed stay installed). Usage: hack/cold-run.sh [--load N] [DIR]  (default
# /tmp/lockstep-cold; emptied). --load N starts N busy loops beside the run, for its whole
# length, as a newcomer's machine that keeps working (or a shared CI runner) has: the suite must
# pass so, within 60 minutes on 2 cores with --load 2 (docs/development.md).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
load=0
if [ "${1:-}" = "--load" ]; then
  load=${2:?--load takes the number of busy loops}
  shift 2
fi
dir=${1:-/tmp/lockstep-cold}
rm -rf "$dir" && mkdir -p "$dir"
git clone -q "$root" "$dir/src" || exit 1
export LOCKSTEP_TOOLS=$dir/tools GOCACHE=$dir/gocache GOMODCACHE=$dir/gomod npm_config_cache=$dir/npm
# Maven reads its local repository from this property (~/.m2/repository otherwise).
export MAVEN_OPTS="${MAVEN_OPTS:-} -Dmaven.repo.local=$dir/m2"
cd "$dir/src" || exit 1
# cpu: the machine's busy and idle jiffies so far (/proc/stat; iowait counts as idle).
cpu() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6}' /proc/stat; }
# A minute-by-minute record of how busy the cores were, in $dir/cpu.log.
( prev=$(cpu); while sleep 60; do cur=$(cpu)
    set -- $prev $cur; echo "$(date +%T) busy $(( 100 * ($3 - $1) / ($3 - $1 + $4 - $2) ))%"; prev=$cur
  done ) >"$dir/cpu.log" 2>&1 &
sampler=$!
# Every 15 s, each process's own CPU seconds so far ($dir/ps.log): at the end, the commands that
# spent the most, a process counted at its last sample (processes shorter than 15 s are missed).
( while sleep 15; do ps -eo pid=,comm=,times= | sed "s/^/$SECONDS /"; done ) >"$dir/ps.log" 2>&1 &
psampler=$!
# The busy loops: each a shell spinning at the normal priority, as other work would.
loops=()
for _ in $(seq 1 "$load"); do
  ( while :; do :; done ) &
  loops+=($!)
done
before=$(cpu)
start=$SECONDS
.ci/run
rc=$?
kill "$sampler" "$psampler" "${loops[@]}" 2>/dev/null
[ "$load" -gt 0 ] && echo "cold run with $load busy loops beside it"
echo "CPU seconds by command (processes alive at a 15 s sample; top 20):"
awk '{ cpu[$2] = $4; name[$2] = $3 } END { for (p in cpu) sum[name[p]] += cpu[p]; for (n in sum) printf "%8d  %s\n", sum[n], n }' "$dir/ps.log" | sort -rn | head -20
set -- $before $(cpu)
echo "cold run: exit $rc after $((SECONDS - start)) s; the cores were busy $(( 100 * ($3 - $1) / ($3 - $1 + $4 - $2) ))% of it (per minute: $dir/cpu.log)"
exit $rc
