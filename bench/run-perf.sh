#!/usr/bin/env bash
# Runs `rebound perf` workloads against a fresh broker each (a new data dir per
# run, started with bench/perf.toml), printing one JSON line per run; this is
# how the figures in BENCHMARKS.md are made.
#
#   bench/run-perf.sh RUNS WORKLOAD...      e.g. bench/run-perf.sh 3 durable fan poison backlog
#   MESSAGES=N bench/run-perf.sh RUNS WORKLOAD...   the same with N messages per run
#                                           (e.g. MESSAGES=5000000 bench/run-perf.sh 2 backlog)
#   bench/run-perf.sh restart MESSAGES      restart time with MESSAGES durable 100 B messages queued
#   bench/run-perf.sh restart MESSAGES kill same, but the broker is killed with SIGKILL rather
#                                           than stopped, so the restart replays the journal
#
# Uses target/release/rebound (cargo build --release -p rebound-cli), or the
# binary REBOUND_BIN names, on port 61999. With STORAGE=postgres the brokers keep
# their state in the PostgreSQL database of REBOUND_POSTGRES_URL (or of
# REBOUND_TEST_POSTGRES_URL, which .ci/postgres.sh sets) instead of a data dir:
#   bash .ci/postgres.sh env STORAGE=postgres bench/run-perf.sh 3 durable fan
set -euo pipefail
cd "$(dirname "$0")/.."
rebound=${REBOUND_BIN:-target/release/rebound}
port=61999
server="127.0.0.1:$port"
scratch=$(mktemp -d /tmp/rebound-bench.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$scratch"' EXIT

storage=()
if [[ ${STORAGE:-} == postgres ]]; then
  storage=(--storage postgres --postgres-url "${REBOUND_POSTGRES_URL:-${REBOUND_TEST_POSTGRES_URL:?no PostgreSQL URL}}")
fi

# Starts a broker on $scratch/data; sets started_ms: from exec to its listening line.
start() {
  local t0 line
  t0=$(date +%s%N)
  coproc BROKER { exec "$rebound" serve --config bench/perf.toml --listen "$server" --http-listen 127.0.0.1:0 --data-dir "$scratch/data" "${storage[@]}" 2>>"$scratch/broker.log"; }
  pid=$BROKER_PID
  read -r line <&"${BROKER[0]}" || line=
  [[ $line == "rebound listening on "* ]] || { echo "broker did not start:" >&2; tail -5 "$scratch/broker.log" >&2; exit 1; }
  started_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
}

stop() { kill "${1:--TERM}" "$pid"; { wait "$pid"; } 2>/dev/null || true; pid=; }

if [[ $1 == restart ]]; then
  messages=$2
  how=${3:-stop}
  rm -rf "$scratch/data"
  start
  "$rebound" queue create --server "$server" --address backlog --queue backlog >/dev/null
  "$rebound" send --server "$server" --address backlog --body "$(head -c 100 /dev/zero | tr '\0' x)" --count "$messages" >/dev/null
  if [[ $how == kill ]]; then stop -KILL; else stop; fi
  start
  queued=$("$rebound" queue stat --server "$server" --queue backlog --json | sed 's/.*"messages":\([0-9]*\).*/\1/')
  echo "{\"system\":\"rebound\",\"restart_messages\":$queued,\"restart_after\":\"$how\",\"restart_ms\":$started_ms}"
  stop
  exit 0
fi

runs=$1; shift
for workload in "$@"; do
  for _ in $(seq "$runs"); do
    rm -rf "$scratch/data"
    start
    "$rebound" perf --server "$server" --workload "$workload" ${MESSAGES:+--messages "$MESSAGES"} --json 2>>"$scratch/perf.log"
    stop
  done
done
