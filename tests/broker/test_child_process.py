"""The child process that runs CPU work off the event loop's core (child_process.py):
answers, failures of the handler and of its factory, and a child that died."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from kshim.broker.child_process import ChildFailed, ChildProcess, Handler
from kshim.broker.full_view.worker import ChunkToApply, ProcessApplier
from kshim.storage.interface import TopicPartition


def doubling_handler(times: str) -> Handler:
    """A factory the child imports by name: answers ``request * times``."""

    def double(request: object) -> object:
        if request == "raise":
            raise ValueError("asked to raise")
        if request == "exit":
            os._exit(3)
        if not isinstance(request, int):
            raise TypeError(type(request).__name__)
        return request * int(times)

    return double


def failing_factory() -> Handler:
    raise LookupError("the factory could not start")


@pytest.fixture
def child() -> Iterator[ChildProcess]:
    process = ChildProcess(f"{__name__}:doubling_handler", ("2",))
    yield process
    process.close()


def test_the_child_answers_each_request_from_one_process(child: ChildProcess) -> None:
    assert child.call(21) == 42
    assert child.call(5) == 10
    assert child.started == 1


def test_a_handler_that_raises_raises_here_with_its_traceback(child: ChildProcess) -> None:
    with pytest.raises(ChildFailed, match="ValueError: asked to raise"):
        child.call("raise")
    assert child.call(1) == 2  # the child lives on
    assert child.started == 1


def test_a_child_found_dead_is_replaced(child: ChildProcess) -> None:
    child.call(1)
    process = child.process
    assert process is not None
    process.kill()
    process.wait()
    assert child.call(3) == 6
    assert child.started == 2


def test_a_child_that_dies_answering_fails_the_call_and_the_next_starts_another(
    child: ChildProcess,
) -> None:
    with pytest.raises(EOFError):
        child.call("exit")
    assert child.process is None
    assert child.call(3) == 6
    assert child.started == 2


def test_close_ends_the_child(child: ChildProcess) -> None:
    child.call(1)
    process = child.process
    assert process is not None
    child.close()
    assert process.poll() == 0
    assert child.process is None


def test_a_factory_that_raises_fails_every_call_with_its_traceback() -> None:
    child = ChildProcess(f"{__name__}:failing_factory")
    try:
        for _ in range(2):
            with pytest.raises(ChildFailed, match="LookupError: the factory could not start"):
                child.call(1)
        assert child.started == 1  # the child stays, answering why, until closed
    finally:
        child.close()


def test_the_view_child_refuses_to_write_for_a_broker_without_the_lock(tmp_path: Path) -> None:
    """The data directory's lock is held by nobody: the child must not open the view."""
    applier = ProcessApplier(str(tmp_path / "full_view"), str(tmp_path))
    try:
        with pytest.raises(ChildFailed, match="NotTheLockHolder"):
            asyncio.run(applier.apply(ChunkToApply(TopicPartition("t", 0), b"", [], 0, 0)))
        assert applier.started
        assert not (tmp_path / "full_view").exists()
    finally:
        applier.close()
    assert os.listdir(tmp_path) == []
