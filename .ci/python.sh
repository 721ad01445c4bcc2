#!/usr/bin/env bash
# The Python client (clients/python) in a venv of its own: its checked-in stubs
# against what the protos generate, mypy --strict, then its tests against the
# broker binary REBOUND_BIN (the tests fail under CI=true without one).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${PYTHON_VENV:-target/python-venv}
# Debian's Python makes venvs only with python3-venv (and refuses plain pip installs: PEP 668).
python3 -c 'import ensurepip' 2>/dev/null \
  || (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv)
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --upgrade pip
"$VENV/bin/pip" install --quiet "./clients/python[test]"
VENV=$(cd "$VENV" && pwd)
cd clients/python
"$VENV/bin/python" scripts/gen_stubs.py --check
"$VENV/bin/mypy" --strict
"$VENV/bin/pytest" -q
