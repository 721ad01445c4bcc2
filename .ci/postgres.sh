#!/usr/bin/env bash
# Runs a command next to a private PostgreSQL: `bash .ci/postgres.sh CMD ARGS...`.
# initdb into a temp dir (as the `postgres` OS user when run as root: the server
# refuses root), a free 127.0.0.1 port, the unix socket in the temp dir, fsync and
# synchronous_commit on; a database `rebound`, whose URL the command finds in
# REBOUND_TEST_POSTGRES_URL. The instance is stopped and removed when the command
# ends, whatever its outcome; the script exits with the command's status. TLS is
# on, with a throwaway CA (.ci/throwaway-tls.sh) whose certificate the command
# finds in REBOUND_TEST_POSTGRES_CA; plain connections are accepted too. One
# role and database, `rebound_cert`, log in only over TLS with a client
# certificate from that CA (pg_hba `cert`): REBOUND_TEST_POSTGRES_CERT_URL names
# it, REBOUND_TEST_POSTGRES_CLIENT_CERT and _KEY the certificate and its key.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: $0 COMMAND [ARGS...]" >&2; exit 2; }

bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] && [ -x "$bin/initdb" ] || { echo "$0: no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)" >&2; exit 1; }

dir=$(mktemp -d /tmp/rebound-pg.XXXXXX)
as_pg=()
if [ "$(id -u)" = 0 ]; then
  chown postgres: "$dir"
  as_pg=(runuser -u postgres --)
fi
stop() {
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT

bash "$(dirname "$0")/throwaway-tls.sh" "$dir/tls" rebound_cert
chmod 600 "$dir/tls/server.key"
# initdb --auth=trust's rules for everyone else, after the certificate-only role's.
cat >"$dir/pg_hba.conf" <<'HBA'
hostssl rebound_cert rebound_cert 127.0.0.1/32 cert
host    rebound_cert rebound_cert 127.0.0.1/32 reject
local   all          all                       trust
host    all          all          127.0.0.1/32 trust
host    all          all          ::1/128      trust
HBA
[ ${#as_pg[@]} -eq 0 ] || chown -R postgres: "$dir/tls"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
  || { cat "$dir/initdb.log" >&2; exit 1; }
"${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start -o \
  "-c listen_addresses=127.0.0.1 -p $port -k $dir -c fsync=on -c synchronous_commit=on -c max_connections=300 -c ssl=on -c ssl_cert_file=$dir/tls/server.pem -c ssl_key_file=$dir/tls/server.key -c ssl_ca_file=$dir/tls/ca.pem -c hba_file=$dir/pg_hba.conf" >/dev/null \
  || { cat "$dir/server.log" >&2; exit 1; }
"${as_pg[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres rebound
"${as_pg[@]}" "$bin/createuser" -h 127.0.0.1 -p "$port" -U postgres rebound_cert
"${as_pg[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres -O rebound_cert rebound_cert

export REBOUND_TEST_POSTGRES_URL="postgres://postgres@127.0.0.1:$port/rebound"
export REBOUND_TEST_POSTGRES_CA="$dir/tls/ca.pem"
export REBOUND_TEST_POSTGRES_CERT_URL="postgres://rebound_cert@127.0.0.1:$port/rebound_cert"
export REBOUND_TEST_POSTGRES_CLIENT_CERT="$dir/tls/client.pem"
export REBOUND_TEST_POSTGRES_CLIENT_KEY="$dir/tls/client.key"
echo "$0: PostgreSQL $("$bin/postgres" --version | awk '{print $3}') at $REBOUND_TEST_POSTGRES_URL" >&2
status=0
"$@" || status=$?
exit "$status"
