"""kcat: the librdkafka command line (the Debian build bundles an older librdkafka).

kcat produces lines (``key:value``; a line without the delimiter has a null key, and ``-Z``
turns an empty value into null) with one set of headers for the whole run and no per-record
timestamps, so its records carry the wall-clock create time; scenarios compare them
without timestamps. It consumes with ``-J`` (one JSON object per record), in assign mode.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Sequence
from typing import Any

from compat_tests.clients import WAIT_S
from tests.e2e.client_helpers import ConsumedRecord, SampleRecord

KCAT = shutil.which("kcat")
KCAT_TIMEOUT_S = 30.0
UNAVAILABLE = None if KCAT else "kcat is not installed (apt-get install kcat)"


class KcatError(Exception):
    """kcat exited with an error; the message is its stderr."""


def run_kcat(arguments: list[str], stdin: bytes = b"", timeout_s: float = KCAT_TIMEOUT_S) -> str:
    assert KCAT is not None, UNAVAILABLE
    completed = subprocess.run(
        [KCAT, *arguments], input=stdin, capture_output=True, timeout=timeout_s, check=False
    )
    if completed.returncode != 0:
        raise KcatError(completed.stderr.decode(errors="replace").strip())
    return completed.stdout.decode()


def record_line(record: SampleRecord) -> str:
    """One ``-K:`` input line; the record must be printable and fit the line format."""
    value = (record.value or b"").decode()
    assert ":" not in value and "\n" not in value, record
    if record.key is None:
        assert record.value is not None, "kcat cannot send a null key with a null value"
        return value
    key = record.key.decode()
    assert key and ":" not in key, "kcat -Z cannot send an empty key"
    return f"{key}:{value}"


def header_arguments(records: Sequence[SampleRecord]) -> list[str]:
    headers = {record.headers for record in records}
    assert len(headers) <= 1, "kcat sets one set of headers for a whole run"
    arguments = []
    for name, value in next(iter(headers), ()):
        assert value is not None, "kcat cannot send a null header value"
        arguments += ["-H", f"{name}={value.decode()}"]
    return arguments


def from_json(line: str) -> ConsumedRecord:
    envelope = json.loads(line)
    raw_headers = envelope.get("headers") or []
    headers = tuple(
        (raw_headers[index], None if raw_headers[index + 1] is None else raw_headers[index + 1])
        for index in range(0, len(raw_headers), 2)
    )
    return ConsumedRecord(
        envelope["offset"],
        _encoded(envelope["key"]),
        _encoded(envelope["payload"]),
        tuple((name, _encoded(value)) for name, value in headers),
        envelope["ts"],
    )


def _encoded(text: Any) -> bytes | None:
    return None if text is None else str(text).encode()


class KcatDriver:
    name = "kcat"

    def produce(
        self,
        bootstrap: str,
        topic: str,
        batches: Sequence[Sequence[SampleRecord]],
        *,
        idempotent: bool = False,
        compression: str = "none",
        partition: int = 0,
    ) -> list[int | None]:
        """One kcat run per batch; kcat reports no offsets, so each is None."""
        for batch in batches:
            arguments = ["-P", "-b", bootstrap, "-t", topic, "-p", str(partition), "-K:", "-Z"]
            arguments += ["-z", compression, "-X", "linger.ms=100"]
            arguments += ["-X", f"enable.idempotence={str(idempotent).lower()}"]
            arguments += header_arguments(batch)
            lines = "".join(record_line(record) + "\n" for record in batch)
            run_kcat(arguments, stdin=lines.encode())
        return [None] * sum(len(batch) for batch in batches)

    def consume(
        self,
        bootstrap: str,
        topic: str,
        count: int,
        *,
        start: int | None = None,
        read_committed: bool = False,
        partition: int = 0,
        wait_s: float = WAIT_S,
    ) -> list[ConsumedRecord]:
        """kcat -C from ``start`` until the end of the partition (-e) or ``count`` records."""
        isolation = "read_committed" if read_committed else "read_uncommitted"
        offset = "beginning" if start is None else str(start)
        arguments = ["-C", "-b", bootstrap, "-t", topic, "-p", str(partition), "-o", offset]
        arguments += ["-e", "-q", "-J", "-c", str(count), "-X", f"isolation.level={isolation}"]
        output = run_kcat(arguments, timeout_s=wait_s + KCAT_TIMEOUT_S)
        return [from_json(line) for line in output.splitlines() if line.strip()]

    def watermarks(self, bootstrap: str, topic: str, partition: int = 0) -> tuple[int, int]:
        """kcat -Q with the logical timestamps -2 (earliest) and -1 (latest)."""
        return (
            self._query(bootstrap, topic, partition, -2),
            self._query(bootstrap, topic, partition, -1),
        )

    def offset_for_time(
        self, bootstrap: str, topic: str, timestamp_ms: int, partition: int = 0
    ) -> tuple[int, int] | None:
        """The first record kcat -C -o s@T returns, or None when it returns none."""
        arguments = ["-C", "-b", bootstrap, "-t", topic, "-p", str(partition)]
        arguments += ["-o", f"s@{timestamp_ms}", "-e", "-q", "-J", "-c", "1"]
        lines = [line for line in run_kcat(arguments).splitlines() if line.strip()]
        if not lines:
            return None
        record = from_json(lines[0])
        return record.offset, record.timestamp_ms

    def _query(self, bootstrap: str, topic: str, partition: int, timestamp: int) -> int:
        output = run_kcat(["-Q", "-b", bootstrap, "-t", f"{topic}:{partition}:{timestamp}", "-J"])
        answer = json.loads(output)
        return int(answer[topic][str(partition)]["offset"])
