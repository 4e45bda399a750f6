#!/usr/bin/env bash
# Installs kshim (if needed) and runs the broker: localhost:9092, data in ./kshim-data.
# Extra arguments go to `kshim serve` (e.g. --listen 0.0.0.0:9092 --set log.retention.ms=3600000).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! python3 -c "import kshim.cli.main" 2>/dev/null || [ "${KSHIM_REINSTALL:-0}" = 1 ]; then
  python3 -m pip install --quiet -e .
fi
exec python3 -m kshim serve "$@"
