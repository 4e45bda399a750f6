"""``kshim.alarm.webhook``: each alarm POSTed as JSON (alarms/registry.py's ``Alarm.as_json``)
from a background task, so the broker never waits on the receiver: a bounded queue (the
oldest dropped, with a log line, when a receiver is down for long), each POST in a worker
thread with a timeout, retried with a doubling pause before it is given up."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

from kshim.broker.alarms.registry import Alarm

log = logging.getLogger(__name__)
MAX_QUEUED = 1000


@dataclass(frozen=True, slots=True)
class WebhookSettings:
    url: str
    timeout_s: float = 5.0
    retries: int = 3  # after the first attempt
    first_pause_s: float = 1.0


class Webhook:
    def __init__(self, settings: WebhookSettings) -> None:
        self.settings = settings
        self._queue: asyncio.Queue[Alarm] = asyncio.Queue(MAX_QUEUED)
        self.delivered = 0
        self.failed = 0

    def notify(self, alarm: Alarm) -> None:
        """Queues ``alarm`` for the receiver; never blocks."""
        if self._queue.full():
            dropped = self._queue.get_nowait()
            log.warning("alarm webhook behind: %s %s not sent", dropped.kind, dropped.subject)
        self._queue.put_nowait(alarm)

    async def run(self) -> None:
        """Sends queued alarms in order until cancelled."""
        while True:
            alarm = await self._queue.get()
            try:
                await self._deliver(alarm)
            finally:
                self._queue.task_done()

    async def drained(self) -> None:
        """Returns once every alarm queued so far was sent or given up (a broker about to
        stop waits for its last alarms, bounded by the caller)."""
        await self._queue.join()

    async def _deliver(self, alarm: Alarm) -> None:
        body = json.dumps(alarm.as_json()).encode()
        pause = self.settings.first_pause_s
        for attempt in range(self.settings.retries + 1):
            try:
                await asyncio.to_thread(self._post, body)
            except Exception as error:  # the receiver's problem: said, retried, given up
                log.warning("alarm webhook %s, attempt %d: %s", self.settings.url, attempt + 1,
                            error)  # fmt: skip
            else:
                self.delivered += 1
                return
            if attempt < self.settings.retries:
                await asyncio.sleep(pause)
                pause *= 2
        self.failed += 1
        log.error("alarm webhook %s: %s %s not delivered", self.settings.url, alarm.kind,
                  alarm.subject)  # fmt: skip

    def _post(self, body: bytes) -> None:
        import urllib.request  # here: a broker without a webhook never loads it (~1 MB)

        request = urllib.request.Request(
            self.settings.url, body, {"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=self.settings.timeout_s) as answer:
            answer.read()
