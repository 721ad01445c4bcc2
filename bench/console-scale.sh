#!/usr/bin/env bash
# The web console with many queues, measured in headless Chromium
# (tests/e2e/console_scale.py --whole: the whole render times, the broker's
# answers included, and the idle CPU); this is how the console figures in
# BENCHMARKS.md are made.
#
#   bench/console-scale.sh QUEUES          e.g. bench/console-scale.sh 100000
#
# Starts target/release/rebound (or the binary REBOUND_BIN names) with a config
# of QUEUES non-durable queues `scale.NNNNNN`, each on its own address, plus
# `orders`, which holds a message, and its dead-letter queue; prints the
# figures as one JSON line. Needs Chromium and Python's playwright, as the
# console's browser tests do.
set -euo pipefail
cd "$(dirname "$0")/.."
queues=${1:?usage: bench/console-scale.sh QUEUES}
rebound=${REBOUND_BIN:-target/release/rebound}
scratch=$(mktemp -d /tmp/rebound-console-scale.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$scratch"' EXIT

python3 - "$queues" >"$scratch/rebound.toml" <<'EOF'
import sys
print('[[address-settings]]\nmatch = "orders"\ndead-letter-address = "DLQ.orders"\n')
print('[[addresses]]\nname = "orders"\n  [[addresses.queues]]\n  name = "orders"\n')
print('[[addresses]]\nname = "DLQ.orders"\n  [[addresses.queues]]\n  name = "DLQ.orders"\n')
for i in range(int(sys.argv[1])):
    print(f'[[addresses]]\nname = "scale.{i:06}"\n  [[addresses.queues]]\n  name = "scale.{i:06}"\n  durable = false\n')
EOF

coproc BROKER { exec "$rebound" serve --config "$scratch/rebound.toml" --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --data-dir "$scratch/data" 2>>"$scratch/broker.log"; }
pid=$BROKER_PID
grpc= http=
while read -r line <&"${BROKER[0]}"; do
  case $line in
    "rebound listening on "*) grpc=${line#rebound listening on } ;;
    "rebound http listening on "*) http=${line#rebound http listening on }; break ;;
  esac
done
[[ -n $http ]] || { echo "broker did not start:" >&2; tail -5 "$scratch/broker.log" >&2; exit 1; }
"$rebound" send --server "$grpc" --address orders --body "order 1" >/dev/null
python3 tests/e2e/console_scale.py "http://$http" orders --whole
