"""Review hooks: asking the producer's side how an overdue half message ends.

A transaction left open past its timeout is not simply aborted (Kafka's
rule) when a hook is configured: the broker asks the hook, which checks the
producer's local transaction (VENUS/RocketMQ "transaction check") and
answers ``commit``, ``abort`` or ``unknown`` (ask again later). Two kinds:

* ``module:function``: a Python callable (plain or async) taking the review
  request dict and returning one of the three words;
* ``http://...`` or ``https://...``: the request is POSTed as JSON and the
  answer is read from the JSON reply's ``decision`` field.

Any failure of the hook (exception, timeout, bad answer) counts as
``unknown``, so a broken hook delays the decision rather than guessing it.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
import json
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

COMMIT, ABORT, UNKNOWN = "commit", "abort", "unknown"
DECISIONS = frozenset({COMMIT, ABORT, UNKNOWN})
HTTP_TIMEOUT_S = 10.0

# What a hook is told, as JSON (reviewer.py's review_request).
ReviewRequest = dict[str, object]
ReviewHook = Callable[[ReviewRequest], Awaitable[str]]


class ReviewHookError(ValueError):
    """The configured hook cannot be loaded."""


def load_review_hook(spec: str) -> ReviewHook | None:
    """Returns the hook named by ``spec`` (empty: None); raises ReviewHookError."""
    spec = spec.strip()
    if not spec:
        return None
    if spec.startswith(("http://", "https://")):
        return _http_hook(spec)
    module_name, separator, function_name = spec.partition(":")
    if not separator:
        raise ReviewHookError(f"review hook {spec!r} is neither module:function nor a URL")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
    except (ImportError, AttributeError) as error:
        raise ReviewHookError(f"cannot load review hook {spec!r}: {error}") from error
    return _callable_hook(function)


def _callable_hook(function: Callable[[ReviewRequest], object]) -> ReviewHook:
    async def review(request: ReviewRequest) -> str:
        try:
            if inspect.iscoroutinefunction(function):
                answer: object = await function(request)
            else:
                answer = await asyncio.to_thread(function, request)
        except Exception:
            log.exception("review hook failed for %s", request.get("transactional_id"))
            return UNKNOWN
        return _decision(answer)

    return review


def _http_hook(url: str) -> ReviewHook:
    # Imported only for an HTTP hook: urllib.request brings http.client and email, about
    # 3 MB of RSS a broker without one would carry for nothing.
    import urllib.request

    def post(request: ReviewRequest) -> object:
        body = json.dumps(request).encode()
        http_request = urllib.request.Request(
            url, data=body, headers={"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(http_request, timeout=HTTP_TIMEOUT_S) as response:
            answer: object = json.loads(response.read())
        return answer.get("decision") if isinstance(answer, dict) else None

    return _callable_hook(post)


def _decision(answer: object) -> str:
    decision = str(answer).strip().lower() if answer is not None else UNKNOWN
    if decision not in DECISIONS:
        log.warning("review hook answered %r; treating it as unknown", answer)
        return UNKNOWN
    return decision
