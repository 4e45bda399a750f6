"""The ``kshim`` command's entry point: keeps test-only libraries and the admin commands'
modules out of the broker process.

kio's message types come from a small phantom-types module that imports hypothesis when it
is installed (as it is wherever kshim's tests run) to register test strategies. The broker
never uses them, and the import costs about 12 MB of RSS and 0.3 s of start-up, so it is
turned off before kio loads: with ``sys.modules["hypothesis"] = None`` the import fails and
kio takes its own no-hypothesis path, as in an installation without the test extras.
"""

from __future__ import annotations

import sys


def main() -> int:
    sys.modules.setdefault("hypothesis", None)  # type: ignore[arg-type]
    if sys.argv[1:2] == ["serve"]:
        # The broker's modules only, not the admin commands' (kshim/cli/serve_command.py).
        from kshim.cli.serve_command import main as serve_command

        return serve_command(sys.argv[2:])
    from kshim.cli.main import main as command_line

    return command_line()
