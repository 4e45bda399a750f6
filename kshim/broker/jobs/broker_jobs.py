"""Every background job of the broker, with what it runs and how often: what Kafka runs
on its scheduler threads (log retention, the log cleaner, the group coordinator's timers
and offset expiry, the review and expiry of transactions, the retries of transaction
markers that could not be written, as Kafka's TransactionMarkerChannelManager), the
applier that keeps every full-data view current, delayed delivery's reader and
dispatcher, and the alarms' checks and webhook. ``lifecycle.py`` starts them all once
the broker has loaded and ends them before it closes.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

from kshim.broker import log_cleaner, retention
from kshim.broker.alarms.checks import AlarmSettings, CheckState, Watched, check_once
from kshim.broker.broker import Broker
from kshim.broker.delay.ingest import DelayHost
from kshim.broker.delay.runner import delay_turn, resume_delays
from kshim.broker.full_view.applier import TOMBSTONE_PURGE_INTERVAL_S, ViewHost, ViewUpkeep
from kshim.broker.full_view.lag import view_lags
from kshim.broker.groups import maintenance
from kshim.broker.groups.consumption_status import committed_lags
from kshim.broker.jobs.runner import Job
from kshim.broker.jobs.schedules import OnFailure, Tick, every, when_woken, while_busy
from kshim.broker.transactions import reviewer
from kshim.storage.interface import TopicPartition


def broker_jobs(broker: Broker) -> list[Job]:
    """The broker's background jobs, each named as its task is."""
    config, groups, review = broker.config, broker.groups, broker.reviewer
    return [
        alarm_checks(broker),
        Job("alarm webhook", functools.partial(_alarm_webhook, broker)),
        _periodic(
            "log retention",
            config.get_int("log.retention.check.interval.ms"),
            functools.partial(retention.retention_pass, broker),
            OnFailure(retention.log, "retention pass failed; retrying next interval"),
        ),
        Job("log cleaner", functools.partial(_log_cleaner, broker)),
        Job("group coordinator", groups.timers.run),
        _periodic(
            "offset retention",
            groups.settings.retention_check_interval_ms,
            functools.partial(maintenance.offset_retention_pass, broker),
            OnFailure(maintenance.log, "offset retention pass failed; retrying next interval"),
        ),
        _periodic(
            "transaction review",
            review.settings.check_interval_ms,
            review.review_pass,
            OnFailure(reviewer.log, "transaction review pass failed; retrying next interval"),
        ),
        Job("transaction markers", broker.transactions.run_marker_retries),
        full_data_views(broker),
        delayed_delivery(broker),
    ]


def alarm_checks(broker: Broker) -> Job:
    """Every ``kshim.alarm.check.interval.ms``; a failed check is the job's failure (its
    supervisor logs it and starts the checks again, with their durations reset)."""

    async def run() -> None:
        settings, state = AlarmSettings.of(broker.config), CheckState()
        await every(
            settings.interval_s, functools.partial(check_once, watched(broker), settings, state)
        )

    return Job("alarm checks", run)


def watched(broker: Broker) -> Watched:
    """What the alarm checks read of the broker."""
    return Watched(
        alarms=broker.alarms,
        monotonic_ms=broker.clock.monotonic,
        data_dir=broker.config.data_dir,
        flush_rounds=broker.flush_rounds,
        group_lags=lambda: committed_lags(
            broker.groups.offsets, functools.partial(_high_watermark, broker)
        ),
        view_lags=functools.partial(view_lags, broker),
    )


def full_data_views(broker: ViewHost) -> Job:
    """Applies whenever a view has something new, and every TOMBSTONE_PURGE_INTERVAL_S
    retries what failed and purges expired tombstones."""

    async def run() -> None:
        upkeep = ViewUpkeep(broker)
        upkeep.resume()
        tick = Tick(TOMBSTONE_PURGE_INTERVAL_S, upkeep.tick)
        # Ticks by the real monotonic clock (when_woken's), not the broker's: a test's fake
        # broker clock may stand still while it waits for a retry or a purge.
        await when_woken(broker.full_view.wake_up, upkeep.apply_pending, tick)

    return Job("full-data views", run)


def delayed_delivery(broker: DelayHost) -> Job:
    """Reads and delivers whenever a ``T.delay`` partition has something new, or the next
    due time (at most MAX_SLEEP_S away while anything is pending) comes."""

    async def run() -> None:
        await resume_delays(broker)
        await when_woken(broker.delays.wake_up, functools.partial(delay_turn, broker))

    return Job("delayed delivery", run)


def _periodic(
    name: str, period_ms: int, work: Callable[[], Awaitable[object]], on_failure: OnFailure
) -> Job:
    return Job(name, functools.partial(every, period_ms / 1000, work, on_failure))


async def _alarm_webhook(broker: Broker) -> None:
    if broker.webhook is not None:
        await broker.webhook.run()


async def _log_cleaner(broker: Broker) -> None:
    if not broker.config.get_bool("log.cleaner.enable"):
        return
    await while_busy(
        functools.partial(log_cleaner.clean_once, broker),
        broker.config.get_int("log.cleaner.backoff.ms") / 1000,
        OnFailure(log_cleaner.log, "log cleaner round failed; retrying after the backoff"),
    )


def _high_watermark(broker: Broker, topic_partition: TopicPartition) -> int | None:
    partition_log = broker.topics.log(topic_partition)
    return None if partition_log is None else partition_log.high_watermark
