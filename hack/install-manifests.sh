#!/usr/bin/env bash
# Prints the install manifests of a config/ overlay with the lockstep image pinned, as a
# release's install.yaml: the overlay's kustomize build, its controller and engine image set
# to IMAGE, and the image of spark queries' drivers and executors ($LOCKSTEP_SPARK_IMAGE) set
# to SPARK_IMAGE, by default IMAGE's repository with -spark and the same tag. It builds a
# throwaway overlay in a temporary folder, so that no tracked file changes.
# Usage: hack/install-manifests.sh OVERLAY IMAGE [SPARK_IMAGE]   (repo:tag or repo@digest)
set -euo pipefail
usage="usage: $0 OVERLAY IMAGE [SPARK_IMAGE]"
overlay=$(cd "${1:?$usage}" && pwd)
image=${2:?$usage}
pinned() {
  local last=${1##*/}
  if [[ $1 == *:latest || ($1 != *@* && $last != *:*) ]]; then
    echo "$0: $1: pin a version (repo:v1.2.3) or a digest, not latest" >&2
    exit 2
  fi
}
pinned "$image"
if [[ $image == *@* ]]; then name=${image%@*} pin="digest: ${image#*@}"; else name=${image%:*} pin="newTag: ${image##*:}"; fi
spark=${3:-}
if [[ -z $spark ]]; then
  if [[ $image == *@* ]]; then
    echo "$0: $image is pinned by digest: name the Spark image too (SPARK_IMAGE), whose digest differs" >&2
    exit 2
  fi
  spark=$name-spark:${image##*:}
fi
pinned "$spark"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# kustomize takes no absolute path as a resource.
cat >"$tmp/kustomization.yaml" <<KUSTOMIZATION
resources:
- $(realpath --relative-to="$tmp" "$overlay")
images:
- name: ghcr.io/lockstep-dev/lockstep
  newName: $name
  $pin
# Engine pods run the controller's own image: the overlay copied its image before this one
# changed it, so copy it again.
replacements:
- source:
    kind: Deployment
    name: lockstep-controller
    fieldPath: spec.template.spec.containers.[name=manager].image
  targets:
  - select:
      kind: Deployment
      name: lockstep-controller
    fieldPaths:
    - spec.template.spec.containers.[name=manager].env.[name=LOCKSTEP_ENGINE_IMAGE].value
patches:
- target: {kind: Deployment, name: lockstep-controller}
  patch: |-
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: lockstep-controller}
    spec:
      template:
        spec:
          containers:
          - name: manager
            env:
            - {name: LOCKSTEP_SPARK_IMAGE, value: "$spark"}
KUSTOMIZATION
${KUSTOMIZE:-kubectl kustomize} "$tmp"
