"""The conditions checked every ``kshim.alarm.check.interval.ms``: a consumer group or a
full-data view lagging above a threshold for longer than a duration, the data directory's
disk short of free bytes, group-commit rounds slow at the 99th percentile. A threshold of 0
turns its check off."""

from __future__ import annotations

import asyncio
import collections
import math
import shutil
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from kshim.broker.alarms.registry import Alarms
from kshim.broker.config.broker_config import BrokerConfig
from kshim.storage.interface import TopicPartition

GROUP_LAG, VIEW_LAG, DISK_FREE, FSYNC_P99 = "group_lag", "view_lag", "disk_free", "fsync_p99"
MIN_ROUNDS = 20  # a percentile of fewer rounds says little
MAX_ROUNDS = 100_000  # kept between two checks; older ones give way


@dataclass(frozen=True, slots=True)
class AlarmSettings:
    interval_s: float
    group_lag_records: int
    group_lag_s: float
    view_lag_records: int
    view_lag_s: float
    disk_free_bytes: int
    fsync_p99_s: float

    @classmethod
    def of(cls, config: BrokerConfig) -> AlarmSettings:
        return cls(
            interval_s=config.get_int("kshim.alarm.check.interval.ms") / 1000,
            group_lag_records=config.get_int("kshim.alarm.group.lag.records"),
            group_lag_s=config.get_int("kshim.alarm.group.lag.duration.ms") / 1000,
            view_lag_records=config.get_int("kshim.alarm.view.lag.records"),
            view_lag_s=config.get_int("kshim.alarm.view.lag.duration.ms") / 1000,
            disk_free_bytes=config.get_int("kshim.alarm.disk.free.bytes"),
            fsync_p99_s=config.get_int("kshim.alarm.fsync.p99.ms") / 1000,
        )


class RecentRounds:
    """Group-commit rounds' durations since the last check (the log store tells it)."""

    def __init__(self) -> None:
        self._seconds: collections.deque[float] = collections.deque(maxlen=MAX_ROUNDS)

    def add(self, seconds: float, batches: int) -> None:
        self._seconds.append(seconds)

    def take(self) -> list[float]:
        taken = list(self._seconds)
        self._seconds.clear()
        return taken


@dataclass(frozen=True, slots=True)
class Watched:
    """What the checks read, each passed in: alarms know none of the services they watch
    (the background job's wiring, kshim/broker/jobs/, says where each comes from)."""

    alarms: Alarms
    monotonic_ms: Callable[[], int]
    data_dir: str
    flush_rounds: RecentRounds
    # (group, partition, records behind) of each committed partition of a stored topic.
    group_lags: Callable[[], Iterable[tuple[str, TopicPartition, int]]]
    # (partition, records not applied yet) of each kept full-data view.
    view_lags: Callable[[], Awaitable[Iterable[tuple[TopicPartition, int]]]]


@dataclass
class CheckState:
    """When each lag first went above its threshold (the duration counts from there)."""

    above_since: dict[tuple[str, str], float] = field(default_factory=dict)


async def check_once(watched: Watched, settings: AlarmSettings, state: CheckState) -> None:
    now_s = watched.monotonic_ms() / 1000  # "sustained for": a duration, steps aside
    alarms = watched.alarms
    if settings.group_lag_records:
        _group_lag(watched, settings, state, now_s)
    if settings.view_lag_records:
        await _view_lag(watched, settings, state, now_s)
    if settings.disk_free_bytes:
        data_dir = watched.data_dir
        free = (await asyncio.to_thread(shutil.disk_usage, data_dir)).free
        alarms.check(DISK_FREE, data_dir, free, settings.disk_free_bytes,
                     f"{free} bytes free for {data_dir}, fewer than "
                     f"{settings.disk_free_bytes}", free < settings.disk_free_bytes)  # fmt: skip
    if settings.fsync_p99_s:
        _fsync(alarms, watched.flush_rounds.take(), settings.fsync_p99_s)


def _group_lag(watched: Watched, settings: AlarmSettings, state: CheckState, now_s: float) -> None:
    limit = settings.group_lag_records
    lags = ((f"{group} {topic_partition}", lag,
             f"consumer group {group} is {lag} records behind on {topic_partition}, more "
             f"than {limit}") for group, topic_partition, lag in watched.group_lags())  # fmt: skip
    _lag_alarms(watched.alarms, state, GROUP_LAG, lags, limit, settings.group_lag_s, now_s)


async def _view_lag(
    watched: Watched, settings: AlarmSettings, state: CheckState, now_s: float
) -> None:
    limit = settings.view_lag_records
    lags = ((str(topic_partition), lag,
             f"the full-data view of {topic_partition} is {lag} records behind, more than "
             f"{limit}") for topic_partition, lag in await watched.view_lags())  # fmt: skip
    _lag_alarms(watched.alarms, state, VIEW_LAG, lags, limit, settings.view_lag_s, now_s)


def _lag_alarms(alarms: Alarms, state: CheckState, kind: str, lags: Iterable[tuple[str, int, str]],
          threshold: int, duration_s: float, now_s: float) -> None:  # fmt: skip
    """Each (subject, lag, message) of ``lags`` held as a ``_sustained`` alarm; the alarms
    of subjects no longer listed (a partition or group gone) are forgotten."""
    seen = set()
    for subject, lag, message in lags:
        seen.add(subject)
        _sustained(alarms, state, kind, subject, lag, threshold, duration_s, now_s, message)
    alarms.forget(kind, seen.__contains__)


def _sustained(alarms: Alarms, state: CheckState, kind: str, subject: str, value: float,
               threshold: float, duration_s: float, now_s: float,
               message: str) -> None:  # fmt: skip
    """Raised once ``value`` has stayed above ``threshold`` for ``duration_s``."""
    key = (kind, subject)
    if value <= threshold:
        state.above_since.pop(key, None)
        alarms.release(kind, subject, value)
        return
    since = state.above_since.setdefault(key, now_s)
    if now_s - since >= duration_s:
        alarms.hold(kind, subject, value, threshold, f"{message} for {now_s - since:.0f} s")


def _fsync(alarms: Alarms, rounds: list[float], threshold_s: float) -> None:
    if len(rounds) < MIN_ROUNDS:
        return  # too few to judge: the alarm stays as it is
    rounds.sort()
    p99 = rounds[max(math.ceil(len(rounds) * 0.99) - 1, 0)]
    message = (f"group-commit rounds took {p99 * 1000:.1f} ms at the 99th percentile over "
               f"{len(rounds)} rounds, more than {threshold_s * 1000:.0f} ms")  # fmt: skip
    alarms.check(FSYNC_P99, "log", p99, threshold_s, message, p99 > threshold_s)
