"""A group member in its own process, for tests that kill it: ``python -m tests.e2e.group_member
CLIENT BOOTSTRAP TOPIC GROUP CLIENT_ID``. Prints ``assigned P...`` whenever its assignment
changes and polls until killed, exiting by itself after a bounded time.
"""

from __future__ import annotations

import sys
import time

from tests.e2e.group_clients import make_member

LIFETIME_S = 120.0


def main(client: str, bootstrap: str, topic: str, group: str, client_id: str) -> None:
    member = make_member(client, bootstrap, topic, group, client_id)
    reported: set[int] | None = None
    deadline = time.monotonic() + LIFETIME_S
    while time.monotonic() < deadline:
        member.poll(0.1)
        assignment = member.assignment()
        if assignment != reported:
            print("assigned", *sorted(assignment), flush=True)
            reported = assignment
    member.close()


if __name__ == "__main__":
    main(*sys.argv[1:6])
