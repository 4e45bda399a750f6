"""kio's schema modules for every served version are held in memory from start-up, so a
codec first used mid-run loads even with no file descriptor left (protocol/schema_preload.py).

Each check runs in a child interpreter: it exhausts file descriptors and changes the import
system, which the test process must keep."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD_TIMEOUT_S = 60

EXHAUST_THEN_LOAD = """
import os, resource, sys
from kshim.protocol import codec, schema_preload
from kshim.protocol.apis import served_versions
{preload}
resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
held = []
try:
    while True:
        held.append(os.open("/dev/null", os.O_RDONLY))
except OSError:
    pass
try:
    for api_key, version in served_versions():
        codec.request_class(api_key, version)
        codec.response_class(api_key, version)
except KeyError as error:
    print("failed", error)
    sys.exit(1)
print("loaded", len(served_versions()))
"""


def run_child(preload: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(EXHAUST_THEN_LOAD).format(preload=preload)
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )


def test_every_served_codec_loads_with_no_descriptor_left_once_preloaded() -> None:
    child = run_child("schema_preload.preload(served_versions())")
    assert child.returncode == 0, child.stdout + child.stderr
    assert child.stdout.startswith("loaded")


def test_without_the_preload_the_same_load_fails() -> None:
    """What the preload prevents: an import that needs a descriptor it cannot get."""
    child = run_child("")
    assert child.returncode == 1, child.stdout + child.stderr
    assert child.stdout.startswith("failed")


def test_preloading_runs_no_schema_module() -> None:
    """Reading the code is cheap; running every module (a dataclass per message, version and
    entity) would cost start-up most of a second, so that waits for first use."""
    script = (
        "import sys\n"
        "from kshim.protocol import schema_preload\n"
        "from kshim.protocol.apis import served_versions\n"
        "finder = schema_preload.preload(served_versions())\n"
        "ran = [name for name in finder.modules if name in sys.modules]\n"
        "print(len(finder.modules), len(ran))\n"
    )
    child = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=True,
    )
    preloaded, ran = map(int, child.stdout.split())
    assert preloaded > 300
    assert ran == 0
