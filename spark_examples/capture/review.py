"""The capture's transaction state in the source database, and the broker's review hook.

Each capture batch is one Kafka transaction whose outcome the source database decides
(the VENUS "half message" check). Per topic, ``kshim_capture_state`` holds:

- ``last_seq``: every change up to it is in the broker, committed or decided commit;
- ``pending_seq`` / ``pending_status``: the batch in flight, ``'open'`` from before its
  first record is produced until the capture records it (then both become NULL and
  ``last_seq`` = ``pending_seq``), or ``'aborted'`` once the review hook decided it.

The hook and the capture change that row only inside a source transaction holding its
lock (SQLite: BEGIN IMMEDIATE; PostgreSQL: SELECT ... FOR UPDATE), so their verdicts
cannot cross: if the hook answers ``abort`` it first marks the batch aborted, and the
capture's later attempt to record it finds the mark and fails; if the capture recorded
it first, the hook answers ``commit``. Repeated reviews give the same answer.

Broker setting: ``kshim.review.hook=spark_examples.capture.review:decide``. The hook
finds the source database of a transactional id in the registry directory named by
``KSHIM_CAPTURE_REGISTRY`` (default ``~/.cache/kshim/capture-registry``), which the
capture writes at start; the broker must run with the same variable.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal, TypeAlias, TypedDict

from spark_examples.capture.schemas import store_shipped
from spark_examples.capture.triggers import STATE_TABLE
from spark_examples.databases import Database, DriverRow, open_database
from spark_examples.databases.schema import TableSchema

log = logging.getLogger(__name__)

# The broker setting naming the hook, and this module's hook in its module:function form.
REVIEW_HOOK_SETTING = "kshim.review.hook"
REVIEW_HOOK = "spark_examples.capture.review:decide"
REGISTRY_VARIABLE = "KSHIM_CAPTURE_REGISTRY"
DEFAULT_REGISTRY = Path.home() / ".cache" / "kshim" / "capture-registry"
TRANSACTIONAL_ID_PREFIX = "kshim-capture-"
OPEN: Final = "open"
ABORTED: Final = "aborted"
# The hook's answer to the broker; "unknown" makes the broker ask again later.
Verdict: TypeAlias = Literal["commit", "abort", "unknown"]
COMMIT: Final = "commit"
ABORT: Final = "abort"
UNKNOWN: Final = "unknown"


@dataclass(frozen=True)
class CaptureState:
    """One topic's row of ``kshim_capture_state`` (see the module docstring)."""

    last_seq: int
    pending_seq: int | None
    pending_status: str | None


class RegistryEntry(TypedDict):
    """Which source database decides a transactional id, and the topic it captures to."""

    source_url: str
    topic: str


def transactional_id_for(topic: str) -> str:
    """The capture producer's transactional id for ``topic``."""
    return TRANSACTIONAL_ID_PREFIX + topic


# -- registry ---------------------------------------------------------------------------
def registry_directory() -> Path:
    """The registry directory (``KSHIM_CAPTURE_REGISTRY`` or the default)."""
    return Path(os.environ.get(REGISTRY_VARIABLE) or DEFAULT_REGISTRY)


def _registry_file(transactional_id: str) -> Path:
    return registry_directory() / (urllib.parse.quote(transactional_id, safe="") + ".json")


def absolute_url(url: str) -> str:
    """``url`` with a relative SQLite/DuckDB path made absolute (the broker's cwd differs)."""
    for scheme in ("sqlite", "duckdb"):
        prefix = f"{scheme}:///"
        if url.startswith(prefix) and not url.startswith(prefix + "/"):
            return prefix + os.path.abspath(urllib.parse.unquote(url[len(prefix) :]))
    return url


def register(transactional_id: str, source_url: str, topic: str) -> None:
    """Records which source database decides ``transactional_id`` (atomic replace)."""
    target = _registry_file(transactional_id)
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_suffix(f".{os.getpid()}.tmp")
    entry: RegistryEntry = {"source_url": absolute_url(source_url), "topic": topic}
    temporary.write_text(json.dumps(entry), encoding="utf-8")
    os.replace(temporary, target)


def registered_source(transactional_id: str) -> RegistryEntry | None:
    """The registry entry {"source_url", "topic"} of ``transactional_id``, or None."""
    try:
        entry: RegistryEntry = json.loads(_registry_file(transactional_id).read_text("utf-8"))
    except FileNotFoundError:
        return None
    return entry


# -- state in the source database -----------------------------------------------------------
def _locked_state(db: Database, topic: str) -> DriverRow | None:
    # Call inside db.transaction(): on PostgreSQL FOR UPDATE locks the row until commit;
    # SQLite's transaction already holds the database write lock.
    lock = " FOR UPDATE" if db.engine == "postgresql" else ""
    rows = db.execute(
        f"SELECT last_seq, pending_seq, pending_status FROM {STATE_TABLE} WHERE topic = ?{lock}",
        [topic],
    )
    return rows[0] if rows else None


def read_state(db: Database, topic: str) -> CaptureState:
    """The capture state of ``topic``, created (last_seq 0) if absent."""
    with db.transaction():
        row = _locked_state(db, topic)
        if row is None:
            db.execute(f"INSERT INTO {STATE_TABLE} (topic, last_seq) VALUES (?, 0)", [topic])
            row = (0, None, None)
    return CaptureState(int(row[0]), row[1], row[2])


def begin_pending(db: Database, topic: str, expected_last: int, target: int) -> None:
    """Marks the batch (expected_last, target] as in flight; raises if the state moved."""
    with db.transaction():
        row = _locked_state(db, topic)
        if row is None or int(row[0]) != expected_last:
            raise RuntimeError(f"capture state of {topic} moved under us: {row}")
        db.execute(
            f"UPDATE {STATE_TABLE} SET pending_seq = ?, pending_status = ? WHERE topic = ?",
            [target, OPEN, topic],
        )


def record_captured(
    db: Database, topic: str, target: int, schemas: Sequence[TableSchema] = ()
) -> bool:
    """Records the in-flight batch ending at ``target`` as captured, with the ``schemas`` it
    shipped (capture/schemas.py), in one transaction.

    Returns False (and changes nothing) if the review hook has aborted it meanwhile.
    """
    with db.transaction():
        row = _locked_state(db, topic)
        if row is None or row[1] != target or row[2] != OPEN:
            return False
        db.execute(
            f"UPDATE {STATE_TABLE} SET last_seq = ?, pending_seq = NULL, "
            "pending_status = NULL WHERE topic = ?",
            [target, topic],
        )
        store_shipped(db, topic, schemas)
    return True


def decide_for_database(db: Database, topic: str) -> Verdict:
    """The verdict on the capture's open broker transaction for ``topic``.

    ``commit`` if the batch was recorded; otherwise marks it aborted and says ``abort``.
    """
    with db.transaction():
        row = _locked_state(db, topic)
        if row is None:
            return ABORT  # the capture never began a batch here, so it produced nothing
        if row[2] == OPEN:
            db.execute(
                f"UPDATE {STATE_TABLE} SET pending_status = ? WHERE topic = ?", [ABORTED, topic]
            )
            return ABORT
        return ABORT if row[2] == ABORTED else COMMIT


def decide(request: Mapping[str, object]) -> Verdict:
    """The broker's review hook (``spark_examples.capture.review:decide``).

    ``unknown`` when the transactional id is not registered or the source is unreachable,
    so the broker asks again later instead of guessing.
    """
    entry = registered_source(str(request.get("transactional_id", "")))
    if entry is None:
        return UNKNOWN
    try:
        db = open_database(entry["source_url"])
        try:
            verdict = decide_for_database(db, entry["topic"])
        finally:
            db.close()
    except Exception:
        log.exception("capture review of %s failed", request.get("transactional_id"))
        return UNKNOWN
    log.info("capture review of %s: %s", request.get("transactional_id"), verdict)
    return verdict
