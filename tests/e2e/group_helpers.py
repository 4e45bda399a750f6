"""Scaffolding for the consumer group end-to-end tests: topics, records, members in threads.

A ``MemberThread`` owns one client consumer and polls it continuously (as an
application would), recording what it consumed and its current assignment;
the test thread only reads snapshots and waits, always with a deadline. A
``MemberPoller`` does the same for dozens of members from one thread.
A ``MemberProcess`` runs a member in a child process, so a test can kill -9
it and watch the group notice through missing heartbeats alone.
"""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.e2e.group_clients import SESSION_TIMEOUT_MS, Consumed, GroupMember, make_member

REPO_ROOT = Path(__file__).resolve().parents[2]
POLL_S = 0.1
PACE_S = 0.05  # a pause between polls, so a rebalance lands in the middle of consuming
# A MemberPoller's pause between sweeps: short against the 0.5 s heartbeat interval, so a
# rejoin that waits for a poll is not held up, long enough that idle sweeps cost little.
SWEEP_PAUSE_S = 0.02


def unique(label: str) -> str:
    return f"{label}-{uuid.uuid4().hex[:10]}"


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result(timeout=20)


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    """Writes ``per_partition`` records to each partition and waits for every ack."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for index in range(per_partition):
        for partition in range(partitions):
            producer.produce(topic, value=f"p{partition}-{index}".encode(), partition=partition)
    assert producer.flush(20) == 0


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Waits for ``condition``; returns the seconds it took; raises AssertionError on timeout."""
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > timeout_s:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)
    return time.monotonic() - start


class _MembersThread(threading.Thread):
    """A thread running group members until asked to stop: what went wrong is kept, and
    ``stop`` asserts that nothing did. Closing revokes, and a commit on revoke may meet a
    rebalance started by another member's exit (REBALANCE_IN_PROGRESS, as Kafka answers):
    such close failures are printed, not raised."""

    stop_timeout_s = 60.0

    def __init__(self, name: str) -> None:
        super().__init__(daemon=True, name=name)
        self._stop_requested = threading.Event()
        self.failure: BaseException | None = None
        self.close_failures: list[BaseException] = []

    def request_stop(self) -> None:
        """Asks the thread to close its members and end, without waiting (see ``stop``)."""
        self._stop_requested.set()

    def stop(self) -> None:
        self.request_stop()
        self.join(self.stop_timeout_s)
        assert not self.is_alive(), f"{self.name} did not stop"
        for error in self.close_failures:
            print(f"{self.name}: close failed: {error!r}")
        assert self.failure is None, f"{self.name} failed: {self.failure!r}"


class MemberThread(_MembersThread):
    """Polls one group member until stopped; closes it (a clean leave) unless told not to."""

    stop_timeout_s = 30.0

    def __init__(
        self,
        client: str,
        bootstrap: str,
        topic: str,
        group: str,
        client_id: str,
        commit_on_revoke: bool = True,
        *,
        pace_s: float = PACE_S,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
    ) -> None:
        super().__init__(client_id)
        self._factory: Callable[[], GroupMember] = lambda: make_member(
            client,
            bootstrap,
            topic,
            group,
            client_id,
            commit_on_revoke,
            session_timeout_ms=session_timeout_ms,
        )
        self._pace_s = pace_s
        self.committed: dict[int, int] = {}  # partition -> position, as of the last commit()
        self._lock = threading.Lock()
        self._consumed: list[Consumed] = []
        self._assignment: set[int] = set()
        self._commit_requested = threading.Event()
        self._committed = threading.Event()

    def run(self) -> None:
        try:
            member = self._factory()
        except BaseException as error:
            self.failure = error
            return
        try:
            self._poll_until_stopped(member)
        except BaseException as error:
            self.failure = error
        try:
            member.close()
        except Exception as error:
            self.close_failures.append(error)

    def _poll_until_stopped(self, member: GroupMember) -> None:
        while not self._stop_requested.is_set():
            consumed = member.poll(POLL_S)
            assignment = member.assignment()
            with self._lock:
                self._consumed += consumed
                self._assignment = assignment
            if self._commit_requested.is_set():
                member.commit()
                self.committed = self._positions()
                self._commit_requested.clear()
                self._committed.set()
            self._stop_requested.wait(self._pace_s)

    def _positions(self) -> dict[int, int]:
        with self._lock:
            positions: dict[int, int] = {}
            for partition, offset in self._consumed:
                positions[partition] = max(positions.get(partition, 0), offset + 1)
            return positions

    def consumed(self) -> list[Consumed]:
        with self._lock:
            return list(self._consumed)

    def assignment(self) -> set[int]:
        with self._lock:
            return set(self._assignment)

    def commit(self, timeout_s: float = 20) -> None:
        """Has the member commit what it consumed so far; returns once it has."""
        self._committed.clear()
        self._commit_requested.set()
        assert self._committed.wait(timeout_s), "commit did not complete"


class MemberPoller(_MembersThread):
    """Many members of one client family, polled in turn by this one thread (as an
    application with one poll loop over many consumers), each member's consumption and
    assignment recorded under its client id; closes them all when stopped.

    One thread for dozens of members keeps a hundred-member group from needing a hundred
    Python threads. Every poll returns at once: aiokafka and librdkafka join and heartbeat
    in their own background threads, and librdkafka's rebalance callbacks, which wait for a
    poll, run within one sweep. Not for kafka-python, whose join must be awaited by a poll
    (see MemberThread and test_groups_scale.Fleet).
    """

    def __init__(
        self,
        client: str,
        bootstrap: str,
        topic: str,
        group: str,
        client_ids: Sequence[str],
        *,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
    ) -> None:
        super().__init__(f"{client}-poller")
        self._factory: Callable[[str], GroupMember] = lambda client_id: make_member(
            client, bootstrap, topic, group, client_id, session_timeout_ms=session_timeout_ms
        )
        self.client_ids = list(client_ids)
        self._lock = threading.Lock()
        self._consumed: dict[str, list[Consumed]] = {client_id: [] for client_id in client_ids}
        self._assignments: dict[str, set[int]] = {client_id: set() for client_id in client_ids}

    def run(self) -> None:
        members = self._create_members()
        try:
            while self.failure is None and not self._stop_requested.is_set():
                self._sweep(members)
                self._stop_requested.wait(SWEEP_PAUSE_S)
        except BaseException as error:
            self.failure = error
        for member in members.values():
            try:
                member.close()
            except Exception as error:
                self.close_failures.append(error)

    def _create_members(self) -> dict[str, GroupMember]:
        """Every member, created at once: aiokafka's start() returns only when the member
        holds its first assignment, so one after another would cost a rebalance each."""
        with ThreadPoolExecutor(max_workers=len(self.client_ids)) as pool:
            futures = {
                client_id: pool.submit(self._factory, client_id) for client_id in self.client_ids
            }
        members: dict[str, GroupMember] = {}
        for client_id, future in futures.items():
            error = future.exception()
            if error is None:
                members[client_id] = future.result()
            elif self.failure is None:
                self.failure = error
        return members

    def _sweep(self, members: dict[str, GroupMember]) -> None:
        for client_id, member in members.items():
            consumed = member.poll(0)
            assignment = member.assignment()
            with self._lock:
                self._consumed[client_id] += consumed
                self._assignments[client_id] = assignment

    def consumed(self) -> list[Consumed]:
        """What every member of this poller consumed so far."""
        with self._lock:
            return [record for records in self._consumed.values() for record in records]

    def assignments(self) -> dict[str, set[int]]:
        """Each member's partitions as of its last poll, by client id."""
        with self._lock:
            return {client_id: set(owned) for client_id, owned in self._assignments.items()}


class MemberProcess:
    """A member in a child process (tests/e2e/group_member.py) that reports its assignment."""

    def __init__(self, client: str, bootstrap: str, topic: str, group: str, client_id: str) -> None:
        command = [
            sys.executable,
            "-m",
            "tests.e2e.group_member",
            client,
            bootstrap,
            topic,
            group,
            client_id,
        ]
        environment = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, cwd=REPO_ROOT, env=environment, stdout=subprocess.PIPE, text=True
        )
        self._lines: queue.Queue[str] = queue.Queue()
        self.assignment: set[int] = set()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line.strip())

    def refresh(self) -> set[int]:
        """The latest assignment the child reported."""
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return self.assignment
            if line.startswith("assigned"):
                self.assignment = {int(p) for p in line.split()[1:]}

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no more heartbeats."""
        self.process.kill()
        self.process.wait(10)
