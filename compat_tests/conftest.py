"""The ``broker`` fixture: every scenario runs once per selected broker (see brokers.py).

- Brokers are session-scoped and started lazily, so pytest groups the scenarios by broker
  and each broker starts once. A broker that cannot run here (Tansu not installed, no
  Docker for Kafka) makes its scenarios skip with the reason, computed once.
- Scenarios not marked ``compat_smoke`` are deselected for brokers that the selection runs
  in smoke mode only (the default for Tansu and Kafka; see brokers.selection).
- ``deviates(...)`` tags become ``xfail(strict=False)`` on the matching broker only, and a
  scenario that one of kshim's intended differences names becomes ``xfail(strict=True)`` on
  the broker the difference makes it fail on (deviations.IntendedDifference).
- An external Kafka (KSHIM_KAFKA_BOOTSTRAP) is never stopped; the topics this session
  created on it are deleted at the end.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis  # noqa: F401  (see below)
import pytest

from compat_tests.brokers import (
    BrokerUnderTest,
    running,
    selection,
    unavailable_reason,
)
from compat_tests.comparison import intended_difference
from compat_tests.deviations import EVERYWHERE, Deviation, matches
from compat_tests.outcomes import scenario_of
from compat_tests.support import delete_session_topics

# hypothesis is imported eagerly on purpose: its pytest plugin imports it lazily at the end of
# the session, and on CPython 3.11.7 that late, assertion-rewritten import failed with
# "SystemError: AST constructor recursion depth mismatch" after client threads had run.

_SKIP_REASONS: dict[str, str | None] = {}
_HERE = Path(__file__).resolve().parent


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "broker" in metafunc.fixturenames:
        names = selection().brokers
        metafunc.parametrize("broker", names, ids=names, indirect=True, scope="session")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    chosen = selection()
    kept, dropped = [], []
    for item in items:
        broker_name = _broker_param(item)
        if broker_name is None:
            kept.append(item)
            continue
        if broker_name in chosen.smoke_only and item.get_closest_marker("compat_smoke") is None:
            dropped.append(item)
            continue
        _apply_deviations(item, broker_name)
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _broker_param(item: pytest.Item) -> str | None:
    """The broker a compat scenario runs on; None for every other test (tests/ included)."""
    if _HERE not in item.path.parents:
        return None
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    name = callspec.params.get("broker")
    return name if isinstance(name, str) else None


def _apply_deviations(item: pytest.Item, broker_name: str) -> None:
    difference = intended_difference(scenario_of(item)[0])
    if difference is not None and difference.fails_on == broker_name:
        item.add_marker(pytest.mark.xfail(reason=difference.reason, strict=True))
        return
    params: dict[str, Any] = dict(item.callspec.params)  # type: ignore[attr-defined]
    tagged = [tuple(mark.args) for mark in item.iter_markers("known_deviation")]
    for deviation, wanted in [*EVERYWHERE, *tagged]:
        assert isinstance(deviation, Deviation)
        if deviation.broker == broker_name and matches(params, wanted):
            item.add_marker(pytest.mark.xfail(reason=deviation.reason, strict=False))
            return


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> Iterator[BrokerUnderTest]:
    """A running broker, started once per session for each selected broker name."""
    name: str = request.param
    if name not in _SKIP_REASONS:
        _SKIP_REASONS[name] = unavailable_reason(name)
    reason = _SKIP_REASONS[name]
    if reason is not None:
        pytest.skip(f"{name}: {reason}")
    with running(name) as started:
        yield started
        if started.external:  # a long-lived, shared Kafka: leave it as it was found
            delete_session_topics(started)
