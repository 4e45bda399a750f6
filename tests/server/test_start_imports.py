"""What a started broker has not loaded: the modules it loads at first use instead
(docs/design.md; each costs a fresh broker memory and start time nobody who does not use
the feature should pay). The broker runs in a child interpreter, which reports its
``sys.modules`` once it answers, then stops."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from kshim.testing import free_port

CHILD_TIMEOUT_S = 60

# Each loaded at first use: the metrics endpoint's server, the rarely used APIs' handlers,
# the consumer protocol's schemas, crc32c's package (its native module only), pickle (the
# child processes' frames), decimal (one config value's formatting).
LOADED_ON_DEMAND = (
    "prometheus_client",
    "http.server",
    "kshim.server.metrics.service",
    "kshim.api.admin.delete_topics",
    "kshim.api.security.describe_acls",
    "kshim.api.groups.list_groups",
    "kio.schema.consumer_protocol_subscription",
    "crc32c",
    "importlib.metadata",
    "pickle",
    "decimal",
)

START_THEN_REPORT = """
import os, signal, socket, sys, tempfile, threading, time
sys.modules.setdefault("hypothesis", None)  # as the kshim command does (launcher.py)
from kshim.cli.serve_command import main

def report():
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", {port}), 1).close()
            break
        except OSError:
            time.sleep(0.02)
    time.sleep(0.5)  # the start's last steps after the port opens
    print(" ".join(sorted(sys.modules)), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)

threading.Thread(target=report, daemon=True).start()
main(["--listen", "127.0.0.1:{port}", "--data-dir", tempfile.mkdtemp(),
      "--set", "kshim.metrics.listen=127.0.0.1:0", "--log-level", "WARNING"])
"""


def test_a_started_broker_has_not_loaded_what_it_loads_on_demand() -> None:
    script = textwrap.dedent(START_THEN_REPORT).format(port=free_port())
    child = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    loaded = set(child.stdout.split())
    assert "kshim.server.listener" in loaded, child.stdout + child.stderr
    assert "crc32c._crc32c" in loaded  # the native module is what batches are checked with
    assert sorted(loaded.intersection(LOADED_ON_DEMAND)) == []
