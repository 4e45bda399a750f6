"""How many connections the broker accepts within its open-file limit (RLIMIT_NOFILE).

Every connection is a file descriptor, and so is every file the store opens: segment and
index files (at most ``kshim.max.open.files``, storage/log/descriptor_cache.py), the duplicates
handed out for zero-copy reads (at most DEFAULT_REGION_CAPACITY), the write-ahead log, the
LMDB environments. Were connections allowed to take the last descriptors, the next
segment the store opens would fail, and a failed write stops the broker
(DiskLogStore._fail): any client could stop it by opening connections. So the connections
accepted stay below the limit by what the store may need: those open once the broker has
started, the store's caches at their bounds, and RESERVED_DESCRIPTORS more. Past that a
new connection is closed as soon as it is accepted, as past ``max.connections``, and the
connections already open go on.

The soft limit is first raised to the hard one (``raise_open_file_limit``), as the JVM
does for Kafka at start on Linux (HotSpot's MaxFDLimit, on by default): the soft limit of
a login shell (often 1,024) is a default for interactive programs, not a server's bound.
"""

from __future__ import annotations

import contextlib
import logging
import os
import resource
from dataclasses import dataclass

from kshim.storage.log.descriptor_cache import DEFAULT_REGION_CAPACITY

log = logging.getLogger(__name__)
# Descriptors kept for what opens later and is bounded by no cache: a new write-ahead log
# file while the old one is open, segment files being rolled, compacted or deleted, LMDB
# readers, a metrics scrape, an alarm's webhook, a TLS connection being refused.
RESERVED_DESCRIPTORS = 64
# Of the descriptors left for clients, the share that refused connections held open by the
# failed-login throttle may take (held_refusals.py).
HELD_REFUSAL_SHARE = 8


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    connections: int  # connections served at once (and TLS handshakes under way)
    held_refusals: int  # refused connections held open before they are closed


def raise_open_file_limit() -> int:
    """Raises this process's soft RLIMIT_NOFILE to its hard limit where it can; returns
    the soft limit then in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def open_descriptors() -> int:
    """How many descriptors this process has open now (0 where /proc cannot say)."""
    for directory in ("/proc/self/fd", "/dev/fd"):
        with contextlib.suppress(OSError):
            return len(os.listdir(directory))
    return 0


def connection_limits(
    max_connections: int, max_open_files: int, max_held_refusals: int
) -> ConnectionLimits:
    """The connections and held refusals accepted at once: ``max.connections`` and
    ``max_held_refusals``, lowered to fit the open-file limit with the store's descriptors
    kept aside. Call once the store has opened its files; logs one warning when the
    limit lowers max.connections."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft == resource.RLIM_INFINITY:
        return ConnectionLimits(max_connections, max_held_refusals)
    open_now = open_descriptors()
    kept = open_now + max_open_files + DEFAULT_REGION_CAPACITY + RESERVED_DESCRIPTORS
    spare = max(soft - kept, 0)
    held = min(max_held_refusals, spare // HELD_REFUSAL_SHARE)
    connections = max(min(max_connections, spare - held), 1)
    if connections < max_connections:
        log.warning(
            "accepting at most %d connections, not max.connections=%d: the open-file limit "
            "(ulimit -n) is %d and %d descriptors are kept for the broker's own files (%d open "
            "now, kshim.max.open.files=%d, %d for zero-copy reads, %d spare); connections "
            "past it are closed at once. Raise the limit to accept more.",
            connections,
            max_connections,
            soft,
            kept,
            open_now,
            max_open_files,
            DEFAULT_REGION_CAPACITY,
            RESERVED_DESCRIPTORS,
        )
    return ConnectionLimits(connections, held)
