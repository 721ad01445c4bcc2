#!/usr/bin/env bash
# Runs the tour of README.md as written, so that the README cannot rot again.
#
# The tour is every line of the ```sh blocks between the `<!-- tour:begin` and
# `<!-- tour:end -->` comments of README.md. This script starts a broker of its
# own, as the quick start does (embedded default config) but on a free loopback
# port and in a temporary data dir, points the commands at it with
# REBOUND_SERVER, puts the built `rebound` first on PATH, and runs the lines in
# order from the checkout's top directory, each bounded in time; the first that
# fails (or times out) fails the script. The broker is stopped however the script
# ends.
#
# A line that cannot run unattended may be skipped, but only visibly: it must end
# with `# tour:skip: <reason>`, and the script prints the line and the reason.
#
# Usage: .ci/tour.sh            builds the binary (cargo build -p rebound-cli)
#        REBOUND_BIN=path .ci/tour.sh   uses that binary instead
set -euo pipefail
cd "$(dirname "$0")/.."

readonly STEP_TIMEOUT=${TOUR_STEP_TIMEOUT:-180} # seconds per line
readonly MIN_LINES=5                            # fewer means the markers were lost

# The tour's lines: inside the markers, inside ``` fences, not blank, not comments.
mapfile -t lines < <(awk '
  /^<!-- tour:begin/ { tour = 1; next }
  /^<!-- tour:end/   { tour = 0; next }
  tour && /^```/     { block = !block; next }
  tour && block && !/^[[:space:]]*(#|$)/ { print }
' README.md)
if ((${#lines[@]} < MIN_LINES)); then
  echo "tour: found ${#lines[@]} lines between the tour markers of README.md; expected at least $MIN_LINES" >&2
  exit 1
fi

if [[ -z ${REBOUND_BIN:-} ]]; then
  cargo build --quiet -p rebound-cli --bin rebound
  target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
  REBOUND_BIN=$target_dir/debug/rebound
fi
[[ -x $REBOUND_BIN ]] || { echo "tour: no rebound binary at $REBOUND_BIN" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/rebound-tour.XXXXXX")
mkdir "$work/bin"
ln -s "$(cd "$(dirname "$REBOUND_BIN")" && pwd)/$(basename "$REBOUND_BIN")" "$work/bin/rebound"
export PATH="$work/bin:$PATH"
unset RUST_LOG

broker=
stop_broker() {
  local status=$?
  if [[ -n $broker ]] && kill -0 "$broker" 2>/dev/null; then
    kill -TERM "$broker" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$broker" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$broker" 2>/dev/null || true
    { wait "$broker"; } 2>/dev/null || true
  fi
  if ((status != 0)) && [[ -f $work/broker.log ]]; then
    echo "--- broker log ---" >&2
    tail -n 50 "$work/broker.log" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap stop_broker EXIT

# Created here: the background job opens them only once it runs.
: >"$work/broker.out"
: >"$work/broker.log"
rebound serve --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 --data-dir "$work/data" \
  </dev/null >"$work/broker.out" 2>"$work/broker.log" &
broker=$!
addr=
for _ in $(seq 200); do
  addr=$(sed -n 's/^rebound listening on //p' "$work/broker.out")
  [[ -n $addr ]] && break
  kill -0 "$broker" 2>/dev/null || { echo "tour: the broker exited before listening" >&2; exit 1; }
  sleep 0.1
done
[[ -n $addr ]] || { echo "tour: the broker did not listen within 20 s" >&2; exit 1; }
export REBOUND_SERVER="http://$addr"
echo "tour: broker on $REBOUND_SERVER, ${#lines[@]} lines of README.md"

ran=0
skipped=0
for line in "${lines[@]}"; do
  if [[ $line =~ \#[[:space:]]*tour:skip:[[:space:]]*(.*)$ ]]; then
    echo "tour: skipped (${BASH_REMATCH[1]}): ${line%%#*}"
    skipped=$((skipped + 1))
    continue
  fi
  echo "\$ $line"
  if ! timeout "$STEP_TIMEOUT" bash -euo pipefail -c "$line" </dev/null; then
    echo "tour: FAILED (or took over ${STEP_TIMEOUT}s): $line" >&2
    exit 1
  fi
  ran=$((ran + 1))
done
echo "tour: $ran lines ran, $skipped skipped"
