"""A small client of Kafka Connect's REST API (https://kafka.apache.org/39/documentation.html#connect_rest).

Blocking calls with the standard library only; every call and every wait is bounded.
A worker that is not the leader forwards writes to the leader itself, so any worker of
the cluster will do.
"""

from __future__ import annotations

import contextlib
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

# Longer than Connect's own limit on a request (RestServer's 90 s), so that its answer arrives,
# a 500 "Request timed out" included: a write waits for the herder's thread, which may be
# busy stopping a task for up to task.shutdown.graceful.timeout.ms.
REQUEST_TIMEOUT_S = 100.0
POLL_INTERVAL_S = 0.25


class ConnectRestError(RuntimeError):
    """Connect answered with an error status; ``status`` holds it, the message its body."""

    def __init__(self, method: str, url: str, status: int, body: str) -> None:
        super().__init__(f"{method} {url}: {status} {body}")
        self.status = status


class ConnectRest:
    """One worker's REST endpoint, such as ``http://127.0.0.1:8083``."""

    def __init__(self, base_url: str, timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: object = None) -> Any:
        """The decoded JSON answer (None when empty); raises ConnectRestError on a status
        of 400 or more and OSError when the worker cannot be reached."""
        url = self.base_url + path
        data = None if body is None else json.dumps(body).encode("utf-8")
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Content-Type", "application/json")
        request.add_header("Accept", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as answer:
                text = answer.read().decode("utf-8")
        except urllib.error.HTTPError as error:
            raise ConnectRestError(method, url, error.code, error.read().decode()) from None
        return json.loads(text) if text else None

    def server_info(self) -> dict[str, Any]:
        """``GET /``: the worker's version, commit and Kafka cluster id."""
        info: dict[str, Any] = self.request("GET", "/")
        return info

    def put_connector(self, name: str, config: Mapping[str, str]) -> dict[str, Any]:
        """``PUT /connectors/{name}/config``: creates the connector or updates its config."""
        answer: dict[str, Any] = self.request("PUT", f"/connectors/{name}/config", dict(config))
        return answer

    def delete_connector(self, name: str) -> None:
        """``DELETE /connectors/{name}``."""
        self.request("DELETE", f"/connectors/{name}")

    def status(self, name: str) -> dict[str, Any]:
        """``GET /connectors/{name}/status``: the connector's and its tasks' state and worker."""
        answer: dict[str, Any] = self.request("GET", f"/connectors/{name}/status")
        return answer

    def wait_until_up(self, timeout_s: float) -> None:
        """Returns once the REST API answers ``GET /``; raises TimeoutError."""
        wait_for(lambda: _answers(self), timeout_s, f"Connect REST API at {self.base_url}")

    def wait_until_running(self, name: str, tasks: int, timeout_s: float) -> dict[str, Any]:
        """Waits until the connector and ``tasks`` tasks are RUNNING; returns the status.
        Raises TimeoutError, with the last status, otherwise (a FAILED task included)."""
        last: dict[str, Any] = {}

        def running() -> bool:
            nonlocal last
            with contextlib.suppress(ConnectRestError, OSError):
                last = self.status(name)
            states = [task["state"] for task in last.get("tasks", [])]
            connector = last.get("connector", {}).get("state")
            return connector == "RUNNING" and states == ["RUNNING"] * tasks

        wait_for(running, timeout_s, f"connector {name} running", lambda: json.dumps(last))
        return last


def _answers(rest: ConnectRest) -> bool:
    try:
        rest.server_info()
    except (ConnectRestError, OSError):
        return False
    return True


def wait_for(
    condition: Callable[[], bool],
    timeout_s: float,
    what: str,
    detail: Callable[[], str] | None = None,
) -> None:
    """Polls ``condition`` until it holds; raises TimeoutError naming ``what``."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            extra = f": {detail()}" if detail is not None else ""
            raise TimeoutError(f"no {what} after {timeout_s} s{extra}")
        time.sleep(POLL_INTERVAL_S)
