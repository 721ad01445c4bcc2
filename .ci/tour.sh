#!/usr/bin/env bash
# Runs the tour of README.md as written, so that the README cannot rot again.
#
# The tour is every line of the ```sh blocks between the `<!-- tour:begin` and
# `<!-- tour:end -->` comments of README.md. This script runs it twice, each time
# against a broker of its own on a free loopback port and in a temporary data dir:
#   1. as the quick start runs it: the embedded default config, plaintext, no users;
#   2. as docs/security.md describes a real deployment: the default config plus
#      TLS (a throwaway CA and server certificate made with openssl) and a user with
#      a password whose role the default's security-settings allow everything; the
#      commands find the server, the CA and the credentials in REBOUND_SERVER,
#      REBOUND_CA_CERT, REBOUND_USER and REBOUND_PASSWORD, as a user would set them.
# It puts the built `rebound` first on PATH and runs the lines in order from the
# checkout's top directory, each bounded in time; the first that fails (or times
# out) fails the script. The broker is stopped however the script ends.
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

unset REBOUND_CA_CERT REBOUND_CLIENT_CERT REBOUND_CLIENT_KEY REBOUND_USER REBOUND_PASSWORD

broker=
# Stops the tour's broker, if one runs: SIGTERM, then SIGKILL after 10 s.
stop_broker() {
  if [[ -n $broker ]] && kill -0 "$broker" 2>/dev/null; then
    kill -TERM "$broker" 2>/dev/null || true
    for _ in $(seq 100); do
      kill -0 "$broker" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$broker" 2>/dev/null || true
    { wait "$broker"; } 2>/dev/null || true
  fi
  broker=
}
finish() {
  local status=$?
  stop_broker
  if ((status != 0)) && [[ -f $work/broker.log ]]; then
    echo "--- broker log ---" >&2
    tail -n 50 "$work/broker.log" >&2
  fi
  rm -rf "$work"
  exit "$status"
}
trap finish EXIT

# Starts a broker with the `serve` arguments given, waits for its ready line and
# points the tour's commands at it (REBOUND_SERVER, scheme $scheme).
start_broker() {
  : >"$work/broker.out" # created here: the background job opens them only once it runs
  : >"$work/broker.log"
  rebound serve --listen 127.0.0.1:0 --http-listen 127.0.0.1:0 "$@" \
    </dev/null >"$work/broker.out" 2>"$work/broker.log" &
  broker=$!
  local addr=
  for _ in $(seq 200); do
    addr=$(sed -n 's/^rebound listening on //p' "$work/broker.out")
    [[ -n $addr ]] && break
    kill -0 "$broker" 2>/dev/null || { echo "tour: the broker exited before listening" >&2; exit 1; }
    sleep 0.1
  done
  [[ -n $addr ]] || { echo "tour: the broker did not listen within 20 s" >&2; exit 1; }
  export REBOUND_SERVER="$scheme://$addr"
}

# Runs every tour line against the broker in REBOUND_SERVER.
run_tour() {
  echo "tour ($1): broker on $REBOUND_SERVER, ${#lines[@]} lines of README.md"
  local ran=0 skipped=0 line
  for line in "${lines[@]}"; do
    if [[ $line =~ \#[[:space:]]*tour:skip:[[:space:]]*(.*)$ ]]; then
      echo "tour: skipped (${BASH_REMATCH[1]}): ${line%%#*}"
      skipped=$((skipped + 1))
      continue
    fi
    echo "\$ $line"
    if ! timeout "$STEP_TIMEOUT" bash -euo pipefail -c "$line" </dev/null; then
      echo "tour ($1): FAILED (or took over ${STEP_TIMEOUT}s): $line" >&2
      exit 1
    fi
    ran=$((ran + 1))
  done
  echo "tour ($1): $ran lines ran, $skipped skipped"
}

# 1. The quick start's broker.
scheme=http
start_broker --data-dir "$work/data"
run_tour "default config"
stop_broker

# 2. TLS and a user. A throwaway CA, and a server certificate for 127.0.0.1.
tls=$work/tls
bash .ci/throwaway-tls.sh "$tls"
password=tour-$RANDOM$RANDOM
hash=$(printf '%s' "$password" | rebound user hash-password)
# The embedded default config (its address-settings, and a `#` security-settings
# entry that lets the role `admin` do everything), plus TLS and a user.
{
  rebound config print-default
  cat <<TOML

[tls]
cert-file = "$tls/server.pem"
key-file = "$tls/server.key"

[[users]]
name = "operator"
password-hash = "$hash"
roles = ["admin"]
TOML
} >"$work/secure.toml"
scheme=https
start_broker --config "$work/secure.toml" --data-dir "$work/secure-data"
export REBOUND_CA_CERT=$tls/ca.pem REBOUND_USER=operator REBOUND_PASSWORD=$password
# The credentials are required: a command without them is refused.
if env -u REBOUND_USER -u REBOUND_PASSWORD rebound queue list >/dev/null 2>&1; then
  echo "tour (TLS and a user): a command without credentials was not refused" >&2
  exit 1
fi
run_tour "TLS and a user"
