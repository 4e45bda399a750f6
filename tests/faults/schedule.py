"""Fault schedules drawn from a seed: the same seed gives the same schedule (the store's
settings, the partitions, the writers and each fault with its moment), so a failing one
can be run again by its seed. The interleaving of the store's worker threads with the
event loop is not part of it: a rerun replays the faults, not every thread switch.
"""

from __future__ import annotations

import enum
import errno
import random
from dataclasses import dataclass

from kshim.storage.files.filesystem import SYNCFS_MIN_FILES
from kshim.storage.interface import LogConfig, StoreSettings


class FaultKind(enum.Enum):
    POWER_CUT = "power cut"  # unsynced bytes lost or torn (simulated_filesystem.py)
    DISK_FULL = "disk full"  # writes fail with ENOSPC, then the power is cut
    WRITE_ERROR = "write error"  # writes fail with EIO, then the power is cut
    FSYNC_FAILURE = "fsync failure"  # syncs fail with EIO, then the power is cut


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
    steps_before: int  # event-loop turns of load before the fault
    steps_during: int  # turns the failing disk is left under load before the power goes
    torn: bool  # the unsynced tails survive as random prefixes, not at all

    @property
    def error_number(self) -> int:
        return errno.ENOSPC if self.kind is FaultKind.DISK_FULL else errno.EIO


@dataclass(frozen=True, slots=True)
class StoreSchedule:
    """One run of the store-level driver (store_driver.py)."""

    seed: int
    partitions: int  # written by idempotent and transactional producers
    compacted_partitions: int  # keyed records, compacted while written
    idempotent_producers: int
    transactional_producers: int
    config: LogConfig
    settings: StoreSettings
    faults: tuple[Fault, ...]


def store_schedule(seed: int) -> StoreSchedule:
    rng = random.Random(seed)
    # Half the schedules spread each round over at least SYNCFS_MIN_FILES files (one
    # syncfs on a real disk); small segment and checkpoint sizes make spills, rolls and
    # checkpoints frequent, so faults land inside them.
    partitions = rng.choice([1, 3, 8, SYNCFS_MIN_FILES, 24, 40])
    config = LogConfig(
        segment_bytes=rng.choice([400, 2_000, 1 << 20]), memtable_bytes=rng.choice([0, 4096])
    )
    settings = StoreSettings(
        memtable_total_bytes=rng.choice([2_000, 64 << 10]),
        wal_segment_bytes=rng.choice([1_000, 16 << 10, 64 << 20]),
        checkpoint_bytes=rng.choice([3_000, 64 << 10]),
        checkpoint_interval_ms=rng.choice([1, 5_000]),
        max_open_files=rng.choice([8, 128]),
        inline_write_max_us=rng.choice([0, 5_000]),
    )
    faults = tuple(_fault(rng) for _ in range(rng.randint(1, 3)))
    return StoreSchedule(
        seed,
        partitions,
        rng.choice([0, 1, 2]),
        rng.randint(1, 3),
        rng.randint(0, 2),
        config,
        settings,
        faults,
    )


def _fault(rng: random.Random) -> Fault:
    kind = rng.choice(list(FaultKind))
    return Fault(kind, rng.randint(20, 1_500), rng.randint(0, 100), rng.random() < 0.5)
