#!/usr/bin/env bash
# .ci/throwaway-tls.sh DIR: a throwaway ECDSA P-256 CA (DIR/ca.pem) and a server
# certificate for 127.0.0.1 and localhost signed by it (DIR/server.pem, DIR/server.key),
# valid one day. For the README tour's TLS run and bench/security.sh; never for a
# real deployment.
set -euo pipefail
dir=$1
mkdir -p "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=throwaway-ca -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=127.0.0.1 \
  -keyout "$dir/server.key" -out "$dir/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$dir/san.ext"
openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
  -days 1 -extfile "$dir/san.ext" -out "$dir/server.pem" 2>/dev/null
