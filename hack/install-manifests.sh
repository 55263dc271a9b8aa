#!/usr/bin/env bash
# Prints the install manifests of a config/ overlay with the lockstep image pinned, as a
# release's install.yaml: the overlay's kustomize build, its controller and engine image set
# to IMAGE. It builds a throwaway overlay in a temporary folder, so that no tracked file
# changes. Usage: hack/install-manifests.sh OVERLAY IMAGE   (IMAGE: repo:tag or repo@digest)
set -euo pipefail
overlay=$(cd "${1:?usage: $0 OVERLAY IMAGE}" && pwd)
image=${2:?usage: $0 OVERLAY IMAGE}
last=${image##*/}
if [[ $image == *:latest || ($image != *@* && $last != *:*) ]]; then
  echo "$0: $image: pin a version (repo:v1.2.3) or a digest, not latest" >&2
  exit 2
fi
if [[ $image == *@* ]]; then name=${image%@*} pin="digest: ${image#*@}"; else name=${image%:*} pin="newTag: ${image##*:}"; fi
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
KUSTOMIZATION
${KUSTOMIZE:-kubectl kustomize} "$tmp"
