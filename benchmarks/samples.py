"""Repeated measurements kept per broker (or variant) and setting, for the side scripts."""

from __future__ import annotations

import statistics
from collections.abc import Iterator, Mapping

Samples = dict[str, dict[str, dict[str, list[float]]]]


def add_samples(samples: Samples, broker: str, setting: str, metrics: Mapping[str, float]) -> None:
    """Appends one repeat's ``metrics`` under ``samples[broker][setting][metric]``."""
    slot = samples.setdefault(broker, {}).setdefault(setting, {})
    for metric, value in metrics.items():
        slot.setdefault(metric, []).append(value)


def medians(metrics: Mapping[str, list[float]]) -> list[float]:
    """The median of each metric, in the order the metrics were first added."""
    return [statistics.median(values) for values in metrics.values()]


def median_rows(samples: Samples) -> Iterator[tuple[str, str, list[float]]]:
    """(broker, setting, medians of its metrics) for each table row."""
    for broker, by_setting in samples.items():
        for setting, metrics in by_setting.items():
            yield broker, setting, medians(metrics)
