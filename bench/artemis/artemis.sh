#!/usr/bin/env bash
# bench/artemis/artemis.sh — a real Apache ActiveMQ Artemis beside rebound, for the
# JMS parity suite (clients/java, io.rebound.tests.parity) and bench/compare.sh.
#
#   artemis.sh start DIR [--config rebound.toml]
#       First use of DIR: fetches org.apache.activemq:apache-artemis:$ARTEMIS_VERSION:zip:bin
#       with `mvn dependency:copy` (cached in the user's Maven repository after the first
#       download), unpacks it into DIR, and creates a broker instance in DIR/instance:
#       NIO journal, `artemis create`'s own defaults otherwise (journal autotune; heap
#       -Xms512M -Xmx2G, in DIR/instance/etc/artemis.profile),
#       a single acceptor on a free port of 127.0.0.1, no web console, login required as
#       $ARTEMIS_USER/$ARTEMIS_PASSWORD (default rebound/rebound). With --config, the
#       instance gets that rebound config's address-settings, its [[addresses]] and its
#       persist-delivery-count-before-delivery (artemis_config.py; keys Artemis has no
#       equivalent for are named on stderr and skipped).
#       Every use: starts the instance in the background (on the same port as before, so a
#       restarted broker keeps its URL), waits until it is active (at most 120 s) and prints
#       what a caller needs, also kept in DIR/artemis.env:
#         ARTEMIS_URL=tcp://127.0.0.1:PORT ARTEMIS_USER=... ARTEMIS_PASSWORD=... ARTEMIS_PID=...
#         ARTEMIS_HOME=... ARTEMIS_INSTANCE=... ARTEMIS_LOG=...
#   artemis.sh stop DIR [--kill]
#       SIGTERM (with --kill: SIGKILL, a crash) to the broker started from DIR, waits for it
#       to exit (SIGKILL after 30 s). DIR stays, so `start DIR` brings the same broker back;
#       remove DIR to discard it.
#
# Exit codes: 0 ok; 1 a failure; 2 usage; 3 Artemis could not be fetched (no Maven, no
# network): callers tell "unavailable" from "broken" by it. Needs Java 11+ (Artemis 2.40),
# Maven and python3 (3.11+, for tomllib). Nothing of Artemis is kept in the repository.
set -euo pipefail

ARTEMIS_VERSION=${ARTEMIS_VERSION:-2.40.0}
ARTEMIS_USER=${ARTEMIS_USER:-rebound}
ARTEMIS_PASSWORD=${ARTEMIS_PASSWORD:-rebound}
HERE=$(cd "$(dirname "$0")" && pwd)

die() { echo "artemis.sh: $*" >&2; exit 1; }
usage() { echo "usage: artemis.sh start DIR [--config rebound.toml] | stop DIR [--kill]" >&2; exit 2; }

# A port of 127.0.0.1 free now (the kernel's choice), as the rebound tests pick theirs.
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

fetch() {
  local dir=$1 zip="apache-artemis-$ARTEMIS_VERSION-bin.zip"
  command -v mvn >/dev/null || { echo "artemis.sh: cannot fetch Artemis: mvn is not installed" >&2; exit 3; }
  if ! mvn -B -ntp -q -Dstyle.color=never dependency:copy \
      -Dartifact="org.apache.activemq:apache-artemis:$ARTEMIS_VERSION:zip:bin" \
      -DoutputDirectory="$dir" >"$dir/fetch.log" 2>&1; then
    echo "artemis.sh: cannot fetch Artemis $ARTEMIS_VERSION from Maven Central:" >&2
    grep -m 3 ERROR "$dir/fetch.log" >&2 || tail -n 3 "$dir/fetch.log" >&2
    exit 3
  fi
  # (zipfile keeps no modes: only bin/artemis needs one.)
  python3 -m zipfile -e "$dir/$zip" "$dir"
  chmod +x "$dir/apache-artemis-$ARTEMIS_VERSION/bin/artemis"
  rm -f "$dir/$zip" "$dir/fetch.log"
}

create() {
  local dir=$1 config=$2 home=$1/apache-artemis-$ARTEMIS_VERSION
  [[ -x $home/bin/artemis ]] || fetch "$dir"
  "$home/bin/artemis" create "$dir/instance" --silent --nio --host 127.0.0.1 \
    --default-port "$(free_port)" --user "$ARTEMIS_USER" --password "$ARTEMIS_PASSWORD" \
    --require-login --no-web --no-amqp-acceptor --no-mqtt-acceptor --no-stomp-acceptor \
    --no-hornetq-acceptor >"$dir/create.log" 2>&1 || die "artemis create failed: $(tail -5 "$dir/create.log")"
  if [[ -n $config ]]; then
    python3 "$HERE/artemis_config.py" "$config" "$dir/instance/etc/broker.xml" \
      "$home/schema/artemis-configuration.xsd"
  fi
}

start() {
  local dir=$1 config=$2
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  if [[ -f $dir/artemis.pid ]] && kill -0 "$(cat "$dir/artemis.pid")" 2>/dev/null; then
    die "a broker from $dir is already running (pid $(cat "$dir/artemis.pid")); stop it first"
  fi
  [[ -d $dir/instance ]] || create "$dir" "$config"
  local port log=$dir/artemis.log
  port=$(sed -n 's|.*<acceptor name="artemis">tcp://127.0.0.1:\([0-9]*\).*|\1|p' "$dir/instance/etc/broker.xml")
  [[ -n $port ]] || die "no acceptor port in $dir/instance/etc/broker.xml"
  : >"$log"
  # bin/artemis execs java, so $! is the broker's own pid.
  nohup "$dir/instance/bin/artemis" run >"$log" 2>&1 </dev/null &
  local pid=$!
  echo "$pid" >"$dir/artemis.pid"
  # AMQ221007: "Server is now active"; the acceptors are started by then.
  for _ in $(seq 1 240); do
    if grep -q AMQ221007 "$log"; then
      {
        echo "ARTEMIS_URL=tcp://127.0.0.1:$port"
        echo "ARTEMIS_USER=$ARTEMIS_USER"
        echo "ARTEMIS_PASSWORD=$ARTEMIS_PASSWORD"
        echo "ARTEMIS_PID=$pid"
        echo "ARTEMIS_HOME=$dir/apache-artemis-$ARTEMIS_VERSION"
        echo "ARTEMIS_INSTANCE=$dir/instance"
        echo "ARTEMIS_LOG=$log"
      } | tee "$dir/artemis.env"
      return
    fi
    kill -0 "$pid" 2>/dev/null || die "the broker exited during start-up: $(tail -20 "$log")"
    sleep 0.5
  done
  kill -9 "$pid" 2>/dev/null || true
  die "the broker was not active within 120 s: $(tail -20 "$log")"
}

stop() {
  local dir=$1 signal=$2 pid
  [[ -f $dir/artemis.pid ]] || return 0
  pid=$(cat "$dir/artemis.pid")
  kill "-$signal" "$pid" 2>/dev/null || true
  for _ in $(seq 1 60); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.5
  done
  kill -9 "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$dir/artemis.pid"
}

[[ $# -ge 2 ]] || usage
command=$1 dir=$2
shift 2
case $command in
  start)
    config=
    if [[ $# -gt 0 ]]; then
      [[ $1 == --config && $# -eq 2 ]] || usage
      [[ -f $2 ]] || die "no such config file: $2"
      config=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
    fi
    start "$dir" "$config"
    ;;
  stop)
    case ${1:-} in
      '') stop "$dir" TERM ;;
      --kill) stop "$dir" KILL ;;
      *) usage ;;
    esac
    ;;
  *) usage ;;
esac
