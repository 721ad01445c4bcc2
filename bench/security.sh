#!/usr/bin/env bash
# The cost of security on the hot paths: `rebound perf` against three brokers,
# alternating, each run on a fresh broker and data dir (bench/perf.toml's
# settings in every one):
#   open      no users, plaintext (the quick start)
#   login     [[users]] with an argon2id password and security-settings: every call
#             logs in (a cached verification) and is checked against permissions
#   login+tls the same over TLS 1.3 (a throwaway ECDSA P-256 CA and certificate)
# Prints one JSON line per run: {"mode": ..., "workload": ..., "broker_cpu_s": ...,
# "perf": <perf --json>}. broker_cpu_s is the broker's user+system CPU time over
# the whole run (from /proc): unlike throughput, it hardly moves when other work
# shares the machine.
#
#   bench/security.sh RUNS WORKLOAD...     e.g. bench/security.sh 5 durable fan
#
# Uses target/release/rebound (cargo build --release -p rebound-cli), or REBOUND_BIN.
set -euo pipefail
cd "$(dirname "$0")/.."
rebound=${REBOUND_BIN:-target/release/rebound}
port=61998
scratch=$(mktemp -d /tmp/rebound-security-bench.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$scratch"' EXIT

tls=$scratch/tls
bash .ci/throwaway-tls.sh "$tls"

password=bench-$RANDOM$RANDOM
users=$(cat <<TOML
[[users]]
name = "bench"
password-hash = "$(printf '%s' "$password" | "$rebound" user hash-password)"
roles = ["app"]

[[security-settings]]
match = "#"
send = ["app"]
consume = ["app"]
browse = ["app"]
create-address = ["app"]
delete-address = ["app"]
create-queue = ["app"]
delete-queue = ["app"]
manage = ["app"]
TOML
)
cp bench/perf.toml "$scratch/open.toml"
{ cat bench/perf.toml; echo; echo "$users"; } >"$scratch/login.toml"
{ cat bench/perf.toml; echo; printf '[tls]\ncert-file = "%s"\nkey-file = "%s"\n\n' \
    "$tls/server.pem" "$tls/server.key"; echo "$users"; } >"$scratch/login+tls.toml"

run() {
  local mode=$1 workload=$2 scheme=http line
  local -a client=()
  [[ $mode == login* ]] && client+=(--user bench --password "$password")
  [[ $mode == *tls ]] && { scheme=https; client+=(--ca-cert "$tls/ca.pem"); }
  rm -rf "$scratch/data"
  coproc BROKER { exec "$rebound" serve --config "$scratch/$mode.toml" --listen "127.0.0.1:$port" \
    --http-listen 127.0.0.1:0 --data-dir "$scratch/data" 2>>"$scratch/broker.log"; }
  pid=$BROKER_PID
  read -r line <&"${BROKER[0]}"
  [[ $line == "rebound listening on "* ]] || { echo "broker did not start: $line" >&2; exit 1; }
  local perf cpu
  perf=$("$rebound" perf --server "$scheme://127.0.0.1:$port" "${client[@]}" --workload "$workload" --json 2>>"$scratch/perf.log")
  # Fields 14 and 15 of /proc/PID/stat: user and system time, in clock ticks.
  cpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$pid/stat")
  printf '{"mode":"%s","workload":"%s","broker_cpu_s":%s,"perf":%s}\n' "$mode" "$workload" "$cpu" "$perf"
  kill -TERM "$pid"; { wait "$pid"; } 2>/dev/null || true; pid=
}

runs=$1; shift
for _ in $(seq "$runs"); do
  for workload in "$@"; do
    for mode in open login login+tls; do
      run "$mode" "$workload"
    done
  done
done
