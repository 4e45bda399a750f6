#!/usr/bin/env bash
# Installs everything the test suite needs on a fresh machine, then runs all of it:
# static checks (ruff, mypy, import-linter), pytest (unit, end-to-end, compatibility) and
# a quick side-by-side benchmark against Apache Kafka.
#
# Python packages go into a virtual environment created from scratch on every run
# (.venv in the checkout, about 40 s from pip's cache), never into the machine's own
# Python: a package left there by earlier work would hide a dependency that
# pyproject.toml forgets to declare. KSHIM_REUSE_VENV=1 keeps an existing one.
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
# A Java 17 JDK: Spark, Kafka and Connect run on it, and one test compiles a Kafka policy class.
command -v javac >/dev/null 2>&1 || need_apt+=(openjdk-17-jdk-headless)
command -v kcat >/dev/null 2>&1 || need_apt+=(kcat)
# Maven fetches Apache Kafka, Spark's Kafka connector and Kafka Connect (kshim/jvm/poms).
command -v mvn >/dev/null 2>&1 || need_apt+=(maven)
# PostgreSQL 15 for the database-synchronisation tests (a throwaway cluster per test session).
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
# libfaketime steps the wall clock under a real broker (tests/e2e/test_clock_jump_e2e.py).
ls /usr/lib/*/faketime/libfaketime.so.1 >/dev/null 2>&1 || need_apt+=(faketime)
# socat, a C byte relay: the floor under the gateway's relaying cost (benchmarks/relay_floor.py).
command -v socat >/dev/null 2>&1 || need_apt+=(socat)
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

# The JVM programs the tests compare with and drive, pinned in kshim/jvm/poms: fetched by
# Maven into ~/.cache/kshim/jvm on the first run (about a minute), taken from there after.
# Without Java or Maven the tests needing them skip, each saying why in one line.
if command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
  python -m kshim.jvm fetch
else
  echo "warning: no java or mvn on PATH; tests needing Kafka, Spark or Connect jars will skip" >&2
fi

python -m ruff check kshim tests compat_tests benchmarks spark_examples examples
python -m ruff format --check kshim tests compat_tests benchmarks spark_examples examples
python -m mypy
lint-imports
# pytest records each compatibility scenario's outcome on kshim and on Apache Kafka; the
# report then fails the run on any disagreement that no intended difference explains
# (compat_tests/deviations.py) and, for a whole run, writes compat_tests/RESULTS.md.
outcomes="$(mktemp -t kshim-outcomes-XXXXXX.json)"
trap 'rm -f "$outcomes" "$outcomes.md"' EXIT
status=0
KSHIM_COMPAT_OUTCOMES="$outcomes" python -m pytest -p compat_tests.outcomes "$@" || status=$?
results=compat_tests/RESULTS.md
[ $# -eq 0 ] || results="$outcomes.md"  # a partial run leaves the committed results alone
if [ -s "$outcomes" ]; then  # empty when pytest stopped before the end of its session
  python -m compat_tests.report --from-outcomes "$outcomes" --output "$results" --check || status=$?
fi
# A full run ends with the side-by-side benchmark's quick mode, kshim beside Apache Kafka
# at its defaults, so that a regression (a p99 that grows, a rate that falls) shows in
# the run that brings it. Its figures are printed and kept in benchmarks/results/quick,
# not judged: on a shared 2-core machine one quick run is too noisy for pass or fail. One
# repeat of each workload (about 3 minutes, where two took 5.7) keeps the whole run within
# its time; the judged figures come from full runs (python -m benchmarks.run, 5 repeats).
if [ $# -eq 0 ] && [ "$status" = 0 ]; then
  python -m benchmarks.run --quick --repeats 1 --brokers kshim,kafka \
    --output benchmarks/results/quick \
    || status=$?
fi
exit "$status"
