#!/usr/bin/env bash
# Compares the Java client with `rebound perf` in the same run (BENCHMARKS.md, "Java client"):
# for each of RUNS rounds, on a fresh broker each (bench/perf.toml, like bench/run-perf.sh),
#   rebound perf --workload durable --batch 1      (the Rust client's Publisher)
#   ProducerBenchmark client                       (the Java client's async API)
#   ProducerBenchmark jms                          (a JMS producer with a CompletionListener)
# printing one JSON line each on stdout. The same load: durable 1 KiB messages, one per call, 64
# in flight, one consumer (on a connection of its own) acking what it received. The Java runs send
# 100,000 messages first, not measured, for the JIT; then 100,000 measured.
#
#   bench/java-perf.sh RUNS
#
# Uses target/release/rebound, or REBOUND_BIN; builds clients/java with Maven first.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
rebound=${REBOUND_BIN:-target/release/rebound}
server="127.0.0.1:61998"
scratch=$(mktemp -d /tmp/rebound-java-bench.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$scratch"' EXIT

# In one reactor, so that the sibling modules resolve to their target/classes (the last module,
# rebound-tests, writes the file last).
(cd clients/java && mvn -B -ntp -q test-compile dependency:build-classpath -pl rebound-tests -am \
  -Dmdep.includeScope=test -Dmdep.outputFile="$scratch/cp") >&2
classpath="clients/java/rebound-tests/target/test-classes:$(cat "$scratch/cp")"

start() {
  rm -rf "$scratch/data"
  coproc BROKER { exec "$rebound" serve --config bench/perf.toml --listen "$server" --http-listen 127.0.0.1:0 --data-dir "$scratch/data" 2>>"$scratch/broker.log"; }
  pid=$BROKER_PID
  local line
  read -r line <&"${BROKER[0]}" || line=
  [[ $line == "rebound listening on "* ]] || { echo "broker did not start:" >&2; tail -5 "$scratch/broker.log" >&2; exit 1; }
}
stop() { kill "$pid"; { wait "$pid"; } 2>/dev/null || true; pid=; }

for _ in $(seq "$runs"); do
  start; "$rebound" perf --server "$server" --workload durable --batch 1 --json; stop
  for api in client jms; do
    start; java -cp "$classpath" io.rebound.tests.bench.ProducerBenchmark "http://$server" "$api"; stop
  done
done
