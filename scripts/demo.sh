#!/usr/bin/env bash
# Runs the database-synchronisation demo (spark_examples/demo.py): a broker, a source
# database with random changes, the capture, Spark applying them to two destinations and
# bootstrapping a third from the full-data view, then the check that every destination
# equals the source. Arguments go to the demo (--operations N, --rate N, --work-dir DIR).
#
# Like scripts/serve.sh, it has a virtual environment of its own, .venv-demo, holding kshim
# with its `demo` extra (pyspark, confluent-kafka, DuckDB), built from scratch when missing
# or when pyproject.toml, this script or the checkout's path changed. Spark needs Java 17
# or 21; its Kafka connector comes from the kshim.jvm cache or, with Maven, from Maven
# Central (the demo says in one line what is missing before it starts anything).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=.venv-demo
stamp="$venv/kshim-demo.stamp"

fingerprint=$({
  cat pyproject.toml scripts/demo.sh
  echo "$PWD/$venv/bin/python"
} | cksum)

installed() {
  [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$fingerprint" ]
}

if ! installed; then
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$venv.lock"
    flock 9
  fi
  if ! installed; then
    echo "demo.sh: installing kshim and the demo's packages into $venv (a minute or two)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e '.[demo]'
    echo "$fingerprint" >"$stamp"
  fi
  if command -v flock >/dev/null 2>&1; then
    exec 9>&-
  fi
fi
exec "$PWD/$venv/bin/python" -m spark_examples.demo "$@"
