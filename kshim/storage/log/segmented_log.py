"""What the disk log (partition_log.py) and its in-memory twin (memory_log.py) do the same
way: bound reads by the log start offset and the high watermark, move the log start, and
summarise their segments for retention planning (retention.py)."""

from __future__ import annotations

from collections.abc import Sequence

from kshim.storage.interface import OffsetOutOfRange
from kshim.storage.log.segment import Segment
from kshim.storage.retention import SegmentSummary


class SegmentedLog:
    """A partition log as a list of segments, oldest first, the last the active one."""

    segments: Sequence[Segment]
    log_start_offset: int
    high_watermark: int

    def read_upper(self, offset: int, upper_offset: int | None) -> int:
        """Where a read from ``offset`` stops: ``upper_offset`` (default and cap: the high
        watermark). Raises OffsetOutOfRange outside [log start offset, high watermark]."""
        if offset < self.log_start_offset or offset > self.high_watermark:
            raise OffsetOutOfRange(
                f"{offset} outside [{self.log_start_offset}, {self.high_watermark}]"
            )
        if upper_offset is None:
            return self.high_watermark
        return min(upper_offset, self.high_watermark)

    def advance_log_start_offset(self, offset: int) -> None:
        """Moves the log start offset forward (DeleteRecords, retention); never backwards."""
        if offset > self.high_watermark:
            raise OffsetOutOfRange(f"{offset} beyond high watermark {self.high_watermark}")
        self.log_start_offset = max(self.log_start_offset, offset)

    def segment_summaries(self) -> list[SegmentSummary]:
        """A snapshot of the segments for retention planning."""
        return [segment.summary() for segment in self.segments]
