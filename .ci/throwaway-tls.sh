#!/usr/bin/env bash
# .ci/throwaway-tls.sh DIR [CLIENT_CN]: a throwaway ECDSA P-256 CA (DIR/ca.pem) and a server
# certificate for 127.0.0.1 and localhost signed by it (DIR/server.pem, DIR/server.key),
# valid one day; with CLIENT_CN, also a client certificate for that name (DIR/client.pem,
# DIR/client.key). For the README tour's TLS run, bench/security.sh and the test
# PostgreSQL (.ci/postgres.sh); never for a real deployment.
set -euo pipefail
dir=$1
client=${2:-}
mkdir -p "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -subj /CN=throwaway-ca -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null

# issue NAME CN EXTENSION: DIR/NAME.pem and DIR/NAME.key, signed by the CA.
issue() {
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$2" \
    -keyout "$dir/$1.key" -out "$dir/$1.csr" 2>/dev/null
  printf '%s\n' "$3" >"$dir/$1.ext"
  openssl x509 -req -in "$dir/$1.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days 1 -extfile "$dir/$1.ext" -out "$dir/$1.pem" 2>/dev/null
}
issue server 127.0.0.1 'subjectAltName=IP:127.0.0.1,DNS:localhost'
[ -z "$client" ] || issue client "$client" 'extendedKeyUsage=clientAuth'
