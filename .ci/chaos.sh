#!/usr/bin/env bash
# The fault-injection run (RELIABILITY.md): `rebound-chaos --schedule ci`, three
# nodes and PostgreSQL in network namespaces under every cluster fault once, then
# one node on the embedded store under kill -9 and a full disk; about 3 minutes.
# Needs root (namespaces, iptables, tmpfs). Installs what it needs from Debian's
# packages when missing: iproute2, iptables, libfaketime, PostgreSQL. Extra
# arguments go to rebound-chaos (e.g. --seed N to replay a run).
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "$0: rebound-chaos needs root (network namespaces, iptables, tmpfs)" >&2; exit 1; }
missing=()
command -v ip >/dev/null || missing+=(iproute2)
command -v iptables >/dev/null || missing+=(iptables)
dpkg -s libfaketime >/dev/null 2>&1 || missing+=(libfaketime)
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || missing+=(postgresql)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "${missing[@]}"
fi
cargo build -p rebound-cli -p rebound-chaos
# The anomalies of open defects (RELIABILITY.md, "Open defects") are reported and
# do not fail the run; lost, unexpected, resurrected and stranded messages do.
exec target/debug/rebound-chaos --schedule ci --rebound target/debug/rebound \
  --known reordered --known group-order "$@"
