#!/usr/bin/env bash
# Runs the broker from this checkout: localhost:9092, data in ./kshim-data. Extra arguments go
# to `kshim serve` (e.g. --listen 0.0.0.0:9092 --set log.retention.ms=3600000).
#
# The broker has its own virtual environment, .venv-serve, holding kshim (editable, so code
# changes apply at the next start) and its run-time dependencies only. It is not the test
# command's .venv, which scripts/test.sh deletes and recreates on every run: a broker started
# from there would lose its libraries under it. Like the test command's, the environment is
# built from scratch, never from the machine's own Python packages; that happens when it is
# missing or when a stamp file no longer matches pyproject.toml, this script, or the
# checkout's path (a moved or copied checkout). Otherwise the broker starts at once.
#
# It runs .venv-serve/bin/kshim by path: never a `kshim` on PATH, which may be another
# checkout's.
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-serve
stamp="$venv/kshim-serve.stamp"

# What the installation depends on; any change means a new environment.
fingerprint=$({
  cat pyproject.toml scripts/serve.sh
  echo "$PWD/$venv/bin/python"
} | cksum)

installed() {
  [ -x "$venv/bin/python" ] && [ -x "$venv/bin/kshim" ] && [ -f "$stamp" ] &&
    [ "$(cat "$stamp")" = "$fingerprint" ]
}

if ! installed; then
  # Two starts at once must not build the same environment together: the second waits for
  # the first, then finds it installed. (flock is Linux's; elsewhere this lock is skipped.)
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$venv.lock"
    flock 9
  fi
  if ! installed; then
    echo "serve.sh: installing kshim into $venv (new, or pyproject.toml or serve.sh changed)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e .
    # Written last: an installation that failed half-way is redone at the next start.
    echo "$fingerprint" >"$stamp"
  fi
  if command -v flock >/dev/null 2>&1; then
    exec 9>&-
  fi
fi
# The other commands (kshim topics, tail, produce, groups, ...) are in the same environment;
# said at each start unless the shell already finds this one.
if [ "$(command -v kshim 2>/dev/null)" != "$PWD/$venv/bin/kshim" ]; then
  echo "serve.sh: kshim's other commands are in $venv/bin: export PATH=\"$PWD/$venv/bin:\$PATH\"" >&2
fi
exec "$PWD/$venv/bin/kshim" serve "$@"
