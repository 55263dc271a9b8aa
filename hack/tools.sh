#!/usr/bin/env bash
# Builds every tool the test suite needs into a cache outside the module,
# idempotently: a tool whose cached binary already reports the pinned version is
# skipped. Usage: hack/tools.sh [tool ...]  (default: all)
#
#   LOCKSTEP_TOOLS  cache folder (default $HOME/.cache/lockstep/tools); binaries in $LOCKSTEP_TOOLS/bin
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=versions.env
. "$here/versions.env"

TOOLS=${LOCKSTEP_TOOLS:-$HOME/.cache/lockstep/tools}
BIN=$TOOLS/bin
SRC=$TOOLS/src
mkdir -p "$BIN" "$SRC"
export GOWORK=off GOFLAGS=-buildvcs=false

log() { printf '[tools] %s\n' "$*"; }

# timed NAME CMD...: runs CMD, printing how long it took.
timed() {
  local name=$1; shift
  local start=$SECONDS
  log "$name: building"
  "$@"
  log "$name: built in $((SECONDS - start))s"
}

# has_version BIN PATTERN: BIN exists and its --version output matches PATTERN.
has_version() {
  [ -x "$1" ] && "$1" --version 2>&1 | grep -qE "$2"
}

# has_module BIN MODULE VERSION: BIN was built from MODULE at VERSION (go version -m),
# for binaries whose --version does not print the module version.
has_module() {
  [ -x "$1" ] && go version -m "$1" 2>/dev/null | grep -qE "^\s+(mod|dep)\s+$2\s+$3(\s|$)"
}


build_etcd() {
  has_version "$BIN/etcd" "etcd Version: $ETCD_VERSION\$" && { log "etcd $ETCD_VERSION: cached"; return; }
  local dir=$SRC/etcd
  rm -rf "$dir"; mkdir -p "$dir"
  printf 'module lockstep.tools/etcd\n\ngo 1.26\n\nrequire go.etcd.io/etcd/server/v3 v%s\n' "$ETCD_VERSION" >"$dir/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "go.etcd.io/etcd/server/v3"\n' >"$dir/tools.go"
  timed "etcd $ETCD_VERSION" bash -c "cd '$dir' && go mod tidy >/dev/null 2>&1 && go build -trimpath -o '$BIN/etcd' go.etcd.io/etcd/server/v3"
}

# kube_wrapper DIR: writes the wrapper module through which kubernetes' commands build:
# kubernetes requires its staging modules at v0.0.0 and replaces them with local
# folders, so the wrapper repeats those replaces against the published versions.
kube_wrapper() {
  local dir=$1 info gomod
  info=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$KUBE_VERSION")
  gomod=$(printf '%s' "$info" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  {
    printf 'module lockstep.tools/kube\n\ngo 1.26\n\nrequire k8s.io/kubernetes v%s\n\n' "$KUBE_VERSION"
    grep -E '^\s+k8s\.io/[a-z0-9-]+ v0\.0\.0$' "$gomod" | awk '{print $1}' |
      grep -vE '^k8s.io/(sample-cli-plugin|sample-controller)$' |
      while read -r m; do printf 'replace %s => %s v%s\n' "$m" "$m" "$KUBE_STAGING_VERSION"; done
  } >"$dir/go.mod"
}

# kube_build NAME CMD...: builds k8s.io/kubernetes/cmd/CMD... at $KUBE_VERSION into $BIN
# in one go build (the commands share most packages), in the wrapper folder $SRC/NAME.
kube_build() {
  local name=$1; shift
  local dir=$SRC/$name c pkgs=()
  rm -rf "$dir"; mkdir -p "$dir"
  kube_wrapper "$dir"
  { printf '//go:build tools\n\npackage tools\n\nimport (\n'; for c in "$@"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done; printf ')\n'; } >"$dir/tools.go"
  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  local minor=${KUBE_VERSION#*.}; minor=${minor%%.*}
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=v$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  (cd "$dir" && go mod tidy >/dev/null 2>&1 && go build -trimpath -ldflags "$ldflags" -o "$BIN/" "${pkgs[@]}")
}

# has_kube BIN: BIN reports exactly Kubernetes v$KUBE_VERSION.
has_kube() {
  [ -x "$1" ] && [ "$("$1" --version 2>/dev/null)" = "Kubernetes v$KUBE_VERSION" ]
}

build_kube_apiserver() {
  has_kube "$BIN/kube-apiserver" && { log "kube-apiserver v$KUBE_VERSION: cached"; return; }
  timed "kube-apiserver v$KUBE_VERSION (6-9 min on 2 cores)" kube_build kube-apiserver kube-apiserver
}

# build_kube_node: the rest of a real single-node cluster, for the e2e suite (e2e/): kubelet,
# kube-scheduler, kube-controller-manager, kube-proxy and kubectl at $KUBE_VERSION.
build_kube_node() {
  local want=() c v
  for c in kubelet kube-scheduler kube-controller-manager kube-proxy; do has_kube "$BIN/$c" || want+=("$c"); done
  v=$("$BIN/kubectl" version --client 2>/dev/null || true)
  [[ $v == *"Client Version: v$KUBE_VERSION"* ]] || want+=(kubectl)
  [ ${#want[@]} -eq 0 ] && { log "kubelet, kube-scheduler, kube-controller-manager, kube-proxy, kubectl v$KUBE_VERSION: cached"; return; }
  timed "${want[*]} v$KUBE_VERSION (~10 min on 2 cores)" kube_build kube-node "${want[@]}"
}

# build_node_packages: the container runtime of the e2e node, from Debian: containerd, runc,
# the CNI plugins (bridge, host-local, portmap), and iptables and conntrack for kube-proxy.
# Installed with apt-get when absent; linked into the cache so tests find them in one place.
build_node_packages() {
  local need=()
  command -v containerd >/dev/null || need+=(containerd)
  command -v runc >/dev/null || need+=(runc)
  [ -x /usr/lib/cni/bridge ] || need+=(containernetworking-plugins)
  command -v iptables >/dev/null || need+=(iptables)
  command -v conntrack >/dev/null || need+=(conntrack)
  if [ ${#need[@]} -gt 0 ]; then
    local sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
    timed "${need[*]} (apt-get install)" bash -c "$sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${need[*]} >/dev/null"
  fi
  for c in containerd containerd-shim-runc-v2 ctr runc; do ln -sf "$(command -v "$c")" "$BIN/$c"; done
  ln -sfn /usr/lib/cni "$BIN/cni"
  log "node packages: containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'), CNI plugins in /usr/lib/cni"
}

go_install() { # NAME PKG@VERSION
  timed "$1" env GOBIN="$BIN" go install "$2"
}

build_versitygw() {
  has_version "$BIN/versitygw" "v?$VERSITYGW_VERSION" || has_module "$BIN/versitygw" github.com/versity/versitygw "v$VERSITYGW_VERSION" &&
    { log "versitygw v$VERSITYGW_VERSION: cached"; return; }
  go_install "versitygw v$VERSITYGW_VERSION" "github.com/versity/versitygw/cmd/versitygw@v$VERSITYGW_VERSION"
}

build_minio() {
  has_module "$BIN/minio" github.com/minio/minio "$MINIO_VERSION" && { log "minio $MINIO_VERSION: cached"; return; }
  go_install "minio $MINIO_VERSION (separate process only, AGPL; ~5 min)" "github.com/minio/minio@$MINIO_VERSION"
}

build_controller_gen() {
  has_version "$BIN/controller-gen" "v$CONTROLLER_GEN_VERSION" && { log "controller-gen v$CONTROLLER_GEN_VERSION: cached"; return; }
  go_install "controller-gen v$CONTROLLER_GEN_VERSION" "sigs.k8s.io/controller-tools/cmd/controller-gen@v$CONTROLLER_GEN_VERSION"
}

build_staticcheck() {
  has_module "$BIN/staticcheck" honnef.co/go/tools "$STATICCHECK_VERSION" && { log "staticcheck $STATICCHECK_VERSION: cached"; return; }
  go_install "staticcheck $STATICCHECK_VERSION" "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
}

build_helm() {
  # The chart's lint and template tests (charts/) and the e2e quickstart's `helm install`.
  has_module "$BIN/helm" helm.sh/helm/v3 "v$HELM_VERSION" && { log "helm v$HELM_VERSION: cached"; return; }
  go_install "helm v$HELM_VERSION (~4 min)" "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
}

build_terraform() {
  # A terraform already on PATH (any 1.x) is used as is; else build the pinned MPL-2.0 release.
  local onpath
  onpath=$(PATH=${PATH//$BIN:/} command -v terraform || true)
  if [ -n "$onpath" ] && "$onpath" version >/dev/null 2>&1; then
    ln -sf "$onpath" "$BIN/terraform"
    log "terraform: using $onpath ($("$onpath" version 2>/dev/null | head -1))"
    return
  fi
  has_version "$BIN/terraform" "Terraform v$TERRAFORM_VERSION" && { log "terraform v$TERRAFORM_VERSION: cached"; return; }
  rm -f "$BIN/terraform"
  go_install "terraform v$TERRAFORM_VERSION (~3 min)" "github.com/hashicorp/terraform@v$TERRAFORM_VERSION"
}

# install_java: Java (17 or later) and Maven from Debian when absent, java linked into the
# cache. Shared by the kafka and spark steps.
install_java() {
  local need=()
  command -v java >/dev/null || need+=(openjdk-17-jdk-headless)
  command -v mvn >/dev/null || need+=(maven)
  if [ ${#need[@]} -gt 0 ]; then
    local sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
    timed "${need[*]} (apt-get install)" bash -c "$sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ${need[*]} >/dev/null"
  fi
  ln -sf "$(readlink -f "$(command -v java)")" "$BIN/java"
}

# build_kafka: Apache Kafka $KAFKA_VERSION for the tests (internal/testenv/kafka.go): the broker's
# jars from Maven Central through the pinned build in hack/kafka/pom.xml, copied into
# $TOOLS/kafka-$KAFKA_VERSION/libs; Java (17 or later) and Maven from Debian when absent,
# java linked into the cache. Skipped when the libs were copied by this very pom.
build_kafka() {
  local dir=$TOOLS/kafka-$KAFKA_VERSION
  install_java
  if [ -f "$dir/libs/kafka_2.13-$KAFKA_VERSION.jar" ] && cmp -s "$here/kafka/pom.xml" "$dir/pom.xml"; then
    log "kafka $KAFKA_VERSION: cached"; return
  fi
  rm -rf "$dir"
  timed "kafka $KAFKA_VERSION (Maven Central)" mvn -q -B -f "$here/kafka/pom.xml" dependency:copy-dependencies \
    -Dkafka.version="$KAFKA_VERSION" -DincludeScope=runtime -DoutputDirectory="$dir/libs.tmp"
  mv "$dir/libs.tmp" "$dir/libs"
  cp "$here/kafka/pom.xml" "$dir/pom.xml"
  log "kafka $KAFKA_VERSION: $(find "$dir/libs" -name '*.jar' | wc -l) jars, java $("$BIN/java" -version 2>&1 | awk -F'"' 'NR==1{print $2}')"
}

# build_spark: the Spark runner (spark/runner, docs/spark.md) and its dependency jars, into
# $TOOLS/spark-$SPARK_VERSION/: libs/ (Spark, Delta, Kafka, hadoop-aws, the AWS SDK modules
# S3A loads, PostgreSQL JDBC) from Maven Central, lockstep-spark-runner.jar, and
# lockstep-spark-runner-tests.jar (the runner's test sources: the planner's oracle). Java and Maven
# as for kafka. The cache is keyed by a hash of spark/runner (pom and sources): a change there
# rebuilds the runner, and the libs when the pom changed; otherwise the step is skipped.
build_spark() {
  local dir=$TOOLS/spark-$SPARK_VERSION runner=$root/spark/runner hash pomhash
  install_java
  hash=$(cd "$runner" && find pom.xml src -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16)
  pomhash=$(sha256sum "$runner/pom.xml" | cut -c1-16)
  if [ -f "$dir/lockstep-spark-runner.jar" ] && [ "$(cat "$dir/runner.hash" 2>/dev/null)" = "$hash" ]; then
    log "spark $SPARK_VERSION runner: cached"; return
  fi
  mkdir -p "$dir"
  if [ ! -d "$dir/libs" ] || [ "$(cat "$dir/libs.hash" 2>/dev/null)" != "$pomhash" ]; then
    rm -rf "$dir/libs" "$dir/libs.tmp"
    timed "spark $SPARK_VERSION jars (Maven Central, ~320 MB)" mvn -q -B -f "$runner/pom.xml" dependency:copy-dependencies \
      -Dspark.version="$SPARK_VERSION" -DincludeScope=runtime -DoutputDirectory="$dir/libs.tmp"
    mv "$dir/libs.tmp" "$dir/libs"
    printf '%s\n' "$pomhash" >"$dir/libs.hash"
  fi
  # The runner jar, and the tests' jar of src/test (the planner's oracle: engine/spark/oracle_test.go
  # runs it beside the runner jar; production never loads it). No Java tests: the tests are Go's.
  timed "spark runner" mvn -q -B -f "$runner/pom.xml" package jar:test-jar -DskipTests -Dspark.version="$SPARK_VERSION"
  # The class-data archive of the old jars (engine/spark.ClassArchive): the tests make a new one.
  rm -f "$dir/lockstep-spark-runner.jsa"
  # Replaced by a rename, so that a runner JVM already running keeps reading the jar it opened.
  cp "$runner/target/lockstep-spark-runner.jar" "$dir/.lockstep-spark-runner.jar.tmp"
  mv "$dir/.lockstep-spark-runner.jar.tmp" "$dir/lockstep-spark-runner.jar"
  cp "$runner/target/lockstep-spark-runner-tests.jar" "$dir/.lockstep-spark-runner-tests.jar.tmp"
  mv "$dir/.lockstep-spark-runner-tests.jar.tmp" "$dir/lockstep-spark-runner-tests.jar"
  rm -rf "$runner/target"
  printf '%s\n' "$hash" >"$dir/runner.hash"
  log "spark $SPARK_VERSION: $(find "$dir/libs" -name '*.jar' | wc -l) jars, runner $hash"
}

# build_registry: Apicurio Registry $APICURIO_VERSION, the Schema Registry of the tests
# (internal/testenv/registry.go), built by hack/registry/pom.xml from Maven Central (that file
# says why this release) in $SRC/registry and copied to $TOOLS/apicurio-registry-$APICURIO_VERSION
# (runner jar and lib/). Runs on the java the kafka step links. Skipped when built by this very pom.
build_registry() {
  local dir=$TOOLS/apicurio-registry-$APICURIO_VERSION src=$SRC/registry
  [ -x "$BIN/java" ] || build_kafka
  if [ -f "$dir/apicurio-registry-runner.jar" ] && cmp -s "$here/registry/pom.xml" "$dir/pom.xml"; then
    log "apicurio-registry $APICURIO_VERSION: cached"; return
  fi
  rm -rf "$dir" "$src"; mkdir -p "$src"
  cp "$here/registry/pom.xml" "$here/registry/settings.xml" "$src/"
  timed "apicurio-registry $APICURIO_VERSION (Maven Central, ~2 min)" mvn -q -B -gs "$src/settings.xml" -f "$src/pom.xml" \
    package -DskipTests -Dapicurio.version="$APICURIO_VERSION"
  mkdir -p "$dir.tmp"
  cp "$src/target/apicurio-registry-1-runner.jar" "$dir.tmp/apicurio-registry-runner.jar"
  cp -r "$src/target/lib" "$dir.tmp/lib"
  cp "$here/registry/pom.xml" "$dir.tmp/pom.xml"
  rm -rf "$dir"; mv "$dir.tmp" "$dir"; rm -rf "$src"
  log "apicurio-registry $APICURIO_VERSION: $(find "$dir/lib" -name '*.jar' | wc -l) jars"
}

# build_spark_image: what Lockstep's Spark image (hack/image-spark, `make image-spark`) packs
# besides the lockstep binary and the runner of the spark step, into
# $TOOLS/spark-image-$SPARK_VERSION/: rootfs/, the Debian packages of $SPARK_IMAGE_DEBS (a
# headless Java 17 and the shared libraries it loads) fetched with apt-get download and
# unpacked with dpkg-deb -x, plus this machine's Java trust store (the JRE's cacerts link;
# Debian generates it in ca-certificates-java's postinst, which dpkg-deb -x does not run);
# k8s-libs/, Spark's Kubernetes backend (hack/spark-image/pom.xml) without the artifacts the
# runner's libs already hold. rootfs/bin/rm comes from $SPARK_IMAGE_RM_DEB (coreutils), the rest
# of that package is left out. Cached by a hash of the pins and the pom.
build_spark_image() {
  local dir=$TOOLS/spark-image-$SPARK_VERSION hash pkg tmp jar artifact have
  build_spark
  hash=$( (echo "$SPARK_IMAGE_DEBS $SPARK_IMAGE_RM_DEB"; cat "$here/spark-image/pom.xml") | sha256sum | cut -c1-16)
  if [ -d "$dir/rootfs" ] && [ -d "$dir/k8s-libs" ] && [ "$(cat "$dir/inputs.hash" 2>/dev/null)" = "$hash" ]; then
    log "spark image $SPARK_VERSION inputs: cached"; return
  fi
  command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || { log "spark_image: needs apt-get and dpkg-deb (Debian or Ubuntu)"; return 1; }
  rm -rf "$dir"
  tmp=$dir/tmp
  mkdir -p "$tmp/debs" "$dir/rootfs.tmp"
  # shellcheck disable=SC2086
  (cd "$tmp/debs" && timed "spark image: $SPARK_IMAGE_DEBS (apt-get download)" apt-get download -q $SPARK_IMAGE_DEBS 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  for pkg in $SPARK_IMAGE_DEBS; do
    ls "$tmp/debs/${pkg%%=*}"_*.deb >/dev/null 2>&1 || { log "spark_image: apt-get download $pkg failed: update SPARK_IMAGE_DEBS in hack/versions.env (apt-cache policy ${pkg%%=*})"; return 1; }
  done
  for deb in "$tmp/debs"/*.deb; do dpkg-deb -x "$deb" "$dir/rootfs.tmp"; done
  mkdir -p "$tmp/rm"
  (cd "$tmp/rm" && apt-get download -q "$SPARK_IMAGE_RM_DEB" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
  ls "$tmp/rm/${SPARK_IMAGE_RM_DEB%%=*}"_*.deb >/dev/null 2>&1 || { log "spark_image: apt-get download $SPARK_IMAGE_RM_DEB failed: update SPARK_IMAGE_RM_DEB in hack/versions.env (apt-cache policy ${SPARK_IMAGE_RM_DEB%%=*})"; return 1; }
  dpkg-deb -x "$tmp/rm/${SPARK_IMAGE_RM_DEB%%=*}"_*.deb "$tmp/rm/root"
  install -D -m 0755 "$tmp/rm/root/bin/rm" "$dir/rootfs.tmp/bin/rm"
  rm -rf "$dir/rootfs.tmp/usr/share/doc" "$dir/rootfs.tmp/usr/share/man" "$dir/rootfs.tmp/usr/share/locale" "$dir/rootfs.tmp/usr/share/lintian"
  if [ -f /etc/ssl/certs/java/cacerts ]; then
    mkdir -p "$dir/rootfs.tmp/etc/ssl/certs/java"
    cp /etc/ssl/certs/java/cacerts "$dir/rootfs.tmp/etc/ssl/certs/java/cacerts"
  else
    log "spark_image: no /etc/ssl/certs/java/cacerts on this machine: the image's Java trusts no TLS server (apt-get install ca-certificates-java)"
  fi
  timed "spark image: Spark's Kubernetes backend (Maven Central)" mvn -q -B -f "$here/spark-image/pom.xml" dependency:copy-dependencies \
    -Dspark.version="$SPARK_VERSION" -DincludeScope=runtime -DoutputDirectory="$tmp/k8s-libs"
  mkdir -p "$dir/k8s-libs.tmp"
  have=$(ls "$TOOLS/spark-$SPARK_VERSION/libs")
  for jar in "$tmp/k8s-libs"/*.jar; do
    artifact=$(basename "$jar" | sed -E 's/-[0-9][^-]*(-[A-Za-z0-9._]+)*\.jar$//')
    grep -qE "^${artifact//./\\.}-[0-9]" <<<"$have" || cp "$jar" "$dir/k8s-libs.tmp/"
  done
  mv "$dir/rootfs.tmp" "$dir/rootfs"
  mv "$dir/k8s-libs.tmp" "$dir/k8s-libs"
  rm -rf "$tmp"
  printf '%s\n' "$hash" >"$dir/inputs.hash"
  log "spark image $SPARK_VERSION inputs: rootfs $(du -sh "$dir/rootfs" | cut -f1), $(find "$dir/k8s-libs" -name '*.jar' | wc -l) Kubernetes jars"
}

# link_postgres: links Debian's PostgreSQL server binaries into the cache, so tests
# find them in one place; fails when none are installed.
link_postgres() {
  local dir
  for dir in "$(dirname "$(command -v initdb 2>/dev/null || echo /none/x)")" /usr/lib/postgresql/*/bin; do
    if [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ] && [ -x "$dir/postgres" ]; then
      for b in initdb pg_ctl postgres; do ln -sf "$dir/$b" "$BIN/$b"; done
      log "postgres: using $dir ($("$dir/postgres" --version))"
      return 0
    fi
  done
  return 1
}

build_postgres() {
  link_postgres && return
  local sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  timed "postgresql (apt-get install postgresql)" bash -c "$sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null"
  link_postgres || { log "postgres: apt-get install postgresql did not provide initdb"; return 1; }
}

# build_chromium: Debian's Chromium, the real browser of the page tests (cmd/lockstep);
# installed with apt-get when absent and linked into the cache.
build_chromium() {
  if ! command -v chromium >/dev/null; then
    local sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
    timed "chromium (apt-get install chromium)" bash -c "$sudo apt-get update -qq && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null"
  fi
  ln -sf "$(command -v chromium)" "$BIN/chromium"
  log "chromium: $(chromium --version 2>/dev/null | head -1)"
}

build_duckdb() {
  # DuckDB 1.5.6's Node API (MIT; its native binding ships inside the npm package), used by the
  # Delta tests as an independent reader. Installed under $LOCKSTEP_TOOLS/node.
  local version=1.5.6-r.1 dir=$TOOLS/node
  if [ -f "$dir/node_modules/@duckdb/node-api/package.json" ] &&
    grep -q "\"version\": \"$version\"" "$dir/node_modules/@duckdb/node-api/package.json"; then
    log "@duckdb/node-api $version: cached"; return
  fi
  command -v npm >/dev/null || { log "duckdb: npm not found (apt-get install nodejs npm)"; return 1; }
  mkdir -p "$dir"
  timed "@duckdb/node-api $version" npm install --silent --no-audit --no-fund --prefix "$dir" "@duckdb/node-api@$version"
}

# Three lanes when building everything: the Kubernetes builds, the other Go builds, and the
# downloads (apt-get, Maven Central, npm), which mostly wait on the network; a Go build's module
# downloads leave the cores idle too, which the other lanes (and `make test`'s `warm`) fill.
# Each lane runs its steps in order; apt-get and Maven appear in the download lane only, so
# they never race.
kube_lane=(etcd kube_apiserver kube_node)
go_lane=(versitygw minio controller_gen staticcheck helm terraform)
fetch_lane=(node_packages postgres chromium duckdb kafka registry spark spark_image)

lane() {
  local t
  for t in "$@"; do "build_${t//-/_}"; done
}

start=$SECONDS
log "cache: $TOOLS"
if [ $# -gt 0 ]; then
  lane "$@"
else
  lane "${kube_lane[@]}" & kube_pid=$!
  lane "${go_lane[@]}" & go_pid=$!
  lane "${fetch_lane[@]}" & fetch_pid=$!
  rc=0
  wait "$kube_pid" || { rc=$?; log "the Kubernetes builds failed (exit $rc): see the lines above"; }
  wait "$go_pid" || { rc=$?; log "the Go builds failed (exit $rc): see the lines above"; }
  wait "$fetch_pid" || { rc=$?; log "the downloads failed (exit $rc): see the lines above"; }
  [ "$rc" -eq 0 ] || exit "$rc"
fi
log "all tools ready in $((SECONDS - start))s"
