"""Which loop ``kshim serve`` runs on (kshim.cli.event_loop)."""

from __future__ import annotations

import asyncio
import sys

import pytest
import uvloop

from kshim.cli.event_loop import loop_factory, run_on


def test_uvloop_is_chosen_when_installed() -> None:
    assert loop_factory("uvloop") is uvloop.new_event_loop


def test_asyncio_means_asyncio_default_loop() -> None:
    assert loop_factory("asyncio") is None


def test_a_missing_uvloop_falls_back_to_asyncio_with_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert loop_factory("uvloop") is None
    assert "uvloop is not installed" in caplog.text


@pytest.mark.parametrize(("name", "loop_type"), [("uvloop", uvloop.Loop),
                                                  ("asyncio", asyncio.BaseEventLoop)])  # fmt: skip
def test_run_on_runs_the_coroutine_on_that_loop(name: str, loop_type: type) -> None:
    seen: list[asyncio.AbstractEventLoop] = []

    async def record_loop() -> None:
        seen.append(asyncio.get_running_loop())

    run_on(name, record_loop())
    assert isinstance(seen[0], loop_type)
