#!/usr/bin/env bash
# Makes a self-signed serving certificate for the webhook Service of config/dev and the
# patch that puts it in the webhook configurations' caBundle. Development only: the key
# stays in config/dev/certs (ignored by git). Usage: config/dev/gen-cert.sh [days]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/certs
svc=lockstep-webhook-service.lockstep-system.svc
mkdir -p "$out"
openssl req -x509 -newkey rsa:2048 -nodes -days "${1:-365}" -subj "/CN=$svc" \
  -addext "subjectAltName=DNS:$svc,DNS:$svc.cluster.local" \
  -keyout "$out/tls.key" -out "$out/tls.crt" 2>/dev/null
ca=$(base64 <"$out/tls.crt" | tr -d '\n')
cat >"$out/ca-patch.yaml" <<PATCH
- op: add
  path: /webhooks/0/clientConfig/caBundle
  value: $ca
PATCH
echo "wrote $out/tls.crt, tls.key and ca-patch.yaml for $svc"
