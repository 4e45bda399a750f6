"""A throwaway PostgreSQL cluster for tests and benchmarks: ``initdb`` in a temporary
directory, started on a free loopback port with trust authentication and its unix socket
inside that directory, so it touches nothing system-wide.

Running as root, the cluster runs as user ``postgres`` (PostgreSQL refuses root) through
``runuser -u postgres --`` in a directory chowned to it. ``postgres_unavailable_reason``
says why there is none (no ``initdb`` under /usr/lib/postgresql/*/bin or on PATH).
Used by tests/sync (the capture's source and the destinations), tests/connect (Debezium's
source, with ``wal_level=logical``) and benchmarks/db_sync.py (a destination). It runs with
``fsync=off``: nothing it holds outlives it, so its commits are not made durable.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from kshim.testing import free_port

ROLE = "kshim"  # the tests connect as this superuser
COMMAND_TIMEOUT_S = 120


def postgres_bin() -> Path | None:
    """The directory of the newest installed PostgreSQL's programs, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def postgres_unavailable_reason() -> str | None:
    """Why no cluster can be started here, or None."""
    if postgres_bin() is None:
        return "PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin)"
    return None


def _as_cluster_user(command: list[str]) -> list[str]:
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *command]
    return command


def _run(command: list[str]) -> None:
    result = subprocess.run(
        _as_cluster_user(command),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(f"{command[0]} failed: {result.stdout}\n{result.stderr}")


@contextlib.contextmanager
def postgres_cluster(settings: Mapping[str, str] | None = None) -> Iterator[str]:
    """Runs a private cluster for the block; yields its base URL,
    ``postgresql://kshim@127.0.0.1:PORT/`` (append a database name). ``settings`` are
    server settings (``-c name=value``), such as ``{"wal_level": "logical"}``. Assumes
    ``postgres_unavailable_reason()`` is None; raises RuntimeError when a step fails."""
    binaries = postgres_bin()
    if binaries is None:
        raise RuntimeError(postgres_unavailable_reason())
    root = Path(tempfile.mkdtemp(prefix="kshim-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data = root / "data"
    port = free_port()
    _run([str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8"])
    options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    options += "".join(f" -c {name}={value}" for name, value in (settings or {}).items())
    pg_ctl = str(binaries / "pg_ctl")
    _run(
        [pg_ctl, "-D", str(data), "-o", options, "-l", str(root / "log"), "-w", "-t", "60", "start"]
    )
    try:
        _create_role(port)
        yield f"postgresql://{ROLE}@127.0.0.1:{port}/"
    finally:
        _run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "stop"])
        shutil.rmtree(root, ignore_errors=True)


def _create_role(port: int) -> None:
    import psycopg

    with psycopg.connect(
        f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True
    ) as connection:
        # A superuser may replicate anyway; Debezium checks for the attribute itself.
        connection.execute(f"CREATE ROLE {ROLE} LOGIN SUPERUSER REPLICATION")
