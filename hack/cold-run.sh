#!/usr/bin/env bash
# Times a cold CI run: a fresh clone of this checkout's HEAD, then .ci/run with empty Go
# module, build, tool, Maven and npm caches, as on a clean machine (Debian packages already
# installed stay installed). Usage: hack/cold-run.sh [DIR]  (default /tmp/lockstep-cold; emptied)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-/tmp/lockstep-cold}
rm -rf "$dir" && mkdir -p "$dir"
git clone -q "$root" "$dir/src" || exit 1
export LOCKSTEP_TOOLS=$dir/tools GOCACHE=$dir/gocache GOMODCACHE=$dir/gomod npm_config_cache=$dir/npm
# Maven reads its local repository from this property (~/.m2/repository otherwise).
export MAVEN_OPTS="${MAVEN_OPTS:-} -Dmaven.repo.local=$dir/m2"
cd "$dir/src" || exit 1
start=$SECONDS
.ci/run
rc=$?
echo "cold run: exit $rc after $((SECONDS - start)) s"
exit $rc
