"""Review hooks for the end-to-end tests, loaded by the broker subprocess.

A broker started with ``kshim.review.hook=tests.e2e.review_hooks:decide`` (its
working directory is the repository root, so this module is importable) calls
``decide`` for every overdue or contested transaction (kshim/broker/transactions/
reviewer.py). The hook keeps no state in memory: everything lives in files under the
directory named by the ``REVIEW_HOOKS_DIR`` environment variable, which the test sets
before starting the broker (the child inherits the environment). So a test can change
the answers while the broker runs or is down, and the call history survives a broker
restart. Per transactional id:

- ``<id>.answers``: comma-separated answers, e.g. ``unknown,commit``. The n-th call
  (counting from 0) gets the n-th answer and the last one repeats; without the file
  the answer is ``unknown``. Besides the broker's three words, ``raise`` makes the hook
  raise an exception and ``maybe`` returns a word the broker does not know; the broker
  must treat both as ``unknown``.
- ``<id>.calls``: every request the hook received, one JSON object per line, written
  before the answer is given, so the test can count the calls and inspect what the
  broker said (transactional id, producer id and epoch, reason, partitions with the
  first and last offsets written).

``decide_async`` is the same hook as a coroutine function (the broker awaits it on its
event loop rather than running it in a thread). The helpers ``set_answers`` and
``recorded_calls`` are for the tests' side of the files.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

DIRECTORY_VARIABLE = "REVIEW_HOOKS_DIR"
DEFAULT_ANSWER = "unknown"
RAISE = "raise"


class ReviewHookFailure(RuntimeError):
    """Raised on purpose when the scripted answer is ``raise``."""


def _file(directory: Path, transactional_id: str, suffix: str) -> Path:
    # Transactional ids may hold characters a file name cannot.
    return directory / f"{urllib.parse.quote(transactional_id, safe='')}.{suffix}"


def set_answers(directory: Path, transactional_id: str, answers: str) -> None:
    """Scripts the hook's answers for one transactional id (atomically replaced)."""
    target = _file(directory, transactional_id, "answers")
    temporary = target.with_suffix(".tmp")
    temporary.write_text(answers, encoding="utf-8")
    os.replace(temporary, target)


def recorded_calls(directory: Path, transactional_id: str) -> list[dict[str, Any]]:
    """The requests the hook has received for one transactional id, oldest first."""
    try:
        text = _file(directory, transactional_id, "calls").read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    # Only whole lines: a line being appended right now is not a call yet.
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def decide(request: dict[str, Any]) -> str:
    """The broker's review hook: records ``request`` and returns the scripted answer."""
    directory = Path(os.environ[DIRECTORY_VARIABLE])
    transactional_id = request["transactional_id"]
    previous_calls = len(recorded_calls(directory, transactional_id))
    with _file(directory, transactional_id, "calls").open("a", encoding="utf-8") as calls:
        calls.write(json.dumps(request, sort_keys=True) + "\n")
    try:
        script = _file(directory, transactional_id, "answers").read_text(encoding="utf-8")
    except FileNotFoundError:
        script = DEFAULT_ANSWER
    answers = [answer.strip() for answer in script.split(",") if answer.strip()]
    answer = answers[min(previous_calls, len(answers) - 1)] if answers else DEFAULT_ANSWER
    if answer == RAISE:
        raise ReviewHookFailure(f"scripted failure for {transactional_id}")
    return answer


async def decide_async(request: dict[str, Any]) -> str:
    """``decide`` as a coroutine function (file access is small and local)."""
    return decide(request)
