#!/usr/bin/env bash
# Installs kshim into the checkout's virtual environment (.venv, created when missing; the
# test command recreates it with the test dependencies) and runs the broker: localhost:9092,
# data in ./kshim-data. Extra arguments go to `kshim serve`
# (e.g. --listen 0.0.0.0:9092 --set log.retention.ms=3600000).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# Always installs this checkout (quick when nothing changed), so `kshim` never runs another one.
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e .
exec "$venv/bin/python" -m kshim serve "$@"
