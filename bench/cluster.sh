#!/usr/bin/env bash
# Three rebound nodes on one PostgreSQL, measured with `rebound perf`: producers
# connected to one node, consumers to another (so sends cross the inbox and
# consumes are forwarded whenever a third node serves the queue), beside one
# node on the same database; one JSON line per run, labelled with "setup".
#
#   bash .ci/postgres.sh bench/cluster.sh RUNS WORKLOAD...   e.g. ... bench/cluster.sh 3 durable fan
#
# Uses target/release/rebound (or REBOUND_BIN) and the database of
# REBOUND_POSTGRES_URL or REBOUND_TEST_POSTGRES_URL (.ci/postgres.sh sets it).
# The nodes listen on 127.0.0.2, .3 and .4 (port 61998), each run on a fresh
# schema so that no run sees another's queues or leases.
set -euo pipefail
cd "$(dirname "$0")/.."
rebound=${REBOUND_BIN:-target/release/rebound}
url=${REBOUND_POSTGRES_URL:-${REBOUND_TEST_POSTGRES_URL:?no PostgreSQL URL (run under .ci/postgres.sh)}}
port=61998
scratch=$(mktemp -d /tmp/rebound-cluster.XXXXXX)
pids=()
stop_all() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'stop_all; [ -n "${KEEP:-}" ] && cp -r "$scratch" "$KEEP"; rm -rf "$scratch"' EXIT

# A fresh schema; prints the URL that uses it.
fresh_schema() {
  local schema="bench_cluster_$$_$(date +%s%N)"
  psql -q "$url" -c "CREATE SCHEMA $schema" >/dev/null
  local sep='?'; [[ $url == *\?* ]] && sep='&'
  echo "${url}${sep}options=-c%20search_path%3D${schema}"
}

# start_node HOST URL [NODE-ID]: a node (or, without an id, a single broker) on
# HOST; returns once it listens.
start_node() {
  local host=$1 db=$2 id=${3:-}
  local cluster=()
  [ -n "$id" ] && cluster=(--node-id "$id" --advertise "$host:$port")
  "$rebound" serve --config bench/perf.toml --listen "$host:$port" --http-listen "" \
    --storage postgres --postgres-url "$db" "${cluster[@]}" >"$scratch/$host.out" 2>>"$scratch/$host.log" &
  pids+=("$!")
  for _ in $(seq 300); do
    grep -q "^rebound listening on " "$scratch/$host.out" && return 0
    kill -0 "$!" 2>/dev/null || break
    sleep 0.1
  done
  echo "node $host did not start:" >&2; tail -5 "$scratch/$host.log" >&2; exit 1
}

# label SETUP: adds "setup" to the JSON line on stdin.
label() { sed "s/^{/{\"setup\":\"$1\",/"; }

runs=$1; shift
for workload in "$@"; do
  for _ in $(seq "$runs"); do
    start_node 127.0.0.2 "$(fresh_schema)"
    "$rebound" perf --server "127.0.0.2:$port" --workload "$workload" --json 2>>"$scratch/perf.log" | label one-node
    stop_all

    db=$(fresh_schema)
    for n in 2 3 4; do start_node "127.0.0.$n" "$db" "node-$n"; done
    "$rebound" perf --server "127.0.0.2:$port" --consumer-server "127.0.0.3:$port" --workload "$workload" \
      --json 2>>"$scratch/perf.log" | label three-nodes
    stop_all
  done
done
