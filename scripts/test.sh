#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs all of it:
# static checks (ruff, mypy, import-linter) and pytest (unit, end-to-end, compatibility).
#
# Python packages go into a virtual environment created from scratch on every run
# (.venv in the checkout, about 40 s from pip's cache), never into the machine's own
# Python: a package left there by earlier work would hide a dependency that
# pyproject.toml forgets to declare. KSHIM_REUSE_VENV=1 keeps an existing one.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
# PostgreSQL 15 for the database-synchronisation tests (a throwaway cluster per test session).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
if [ ${#need_apt[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
  else
    echo "warning: cannot install ${need_apt[*]}; tests needing them will skip" >&2
  fi
fi

venv=.venv
if [ "${KSHIM_REUSE_VENV:-0}" != 1 ] || [ ! -x "$venv/bin/python" ]; then
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[test]'
# Tests start `kshim`, `lint-imports` and sys.executable: all from the environment.
export PATH="$PWD/$venv/bin:$PATH"
export VIRTUAL_ENV="$PWD/$venv"

# The Spark connector jars cannot come from Maven here; use the machine's cache when present
# (see spark_examples/README.md). Tests needing them skip with a reason otherwise.
export KSHIM_SPARK_JARS="${KSHIM_SPARK_JARS:-$HOME/.cache/kshim/spark-jars}"

python -m ruff check kshim tests compat_tests benchmarks spark_examples
python -m ruff format --check kshim tests compat_tests benchmarks spark_examples
python -m mypy
lint-imports
python -m pytest "$@"
