"""Delayed delivery's durable schedule: every pending record, in append-only bucket files
by due time (kshim/storage/schedule/delay_buckets.py), with a small LMDB environment beside them.

A record produced to ``T.delay`` is read from that log once its transaction (if any) is
decided and copied here whole, so ``T.delay``'s own retention can never lose a pending
record however far ahead it is due (QMQ keeps its schedule apart from the message log
for the same reason: docs/references.md). Records are appended to the file of their bucket, never
inserted in place: a B-tree keyed by due time took a page write per record scattered
over the tree, half-empty pages and mapped memory growing with the records pending.
LMDB holds only what is small, in the same transaction as what it describes:

- per bucket, how many bytes of its file are committed (longer files are cut back at
  start: a crash came between the append and the commit), how far a split has read it,
  its delivery mark (the last record delivered, by order and seq) and the first due
  time per topic (for ``kshim delays``);
- per ``T.delay`` partition, the next offset not yet read into the schedule, moved with
  the bucket lengths of the records it covers (a replay after a crash skips them);
- the next seq (records are numbered as read) and topic ids (entries name their topic
  by a number; a deleted topic's id is dropped, so its entries are skipped as met);
- cancellations: per topic and hashed record key, the seq below which records with that
  key are cancelled (a replace is a cancel at the new record's own seq). A cancelled
  record stays in its file and is dropped when its bucket is split or it falls due;
  until then it counts as pending. A cancellation is forgotten once no bucket holds a
  record older than it;
- a delivery under way (``begin_turn``/``finish_turn``, kshim/broker/delay/dispatcher.py);
- per topic, records pending and how late the delivered ones were.

The minute buckets near now are held in memory, merged into one heap by (order, seq):
memory is bounded by the records due within about a minute, not by those pending. The
environment and directory are created only when a delayed record is first scheduled.
Methods block (files, LMDB): call them from one worker thread at a time; they are
serialised with ``release``.

The store is built in parts, a module each: its environment, bucket index and files
(delay_environment.py), reading ``T.delay`` in (delay_intake.py, with delay_appends.py),
loading and splitting buckets (delay_upkeep.py), delivering (delay_delivery.py) and what
is said per topic (delay_summary.py); the values it stores and hands out are in
delay_records.py, its LMDB keys in kshim/storage/meta/lmdb_keys.py.
"""

from __future__ import annotations

from kshim.storage.schedule.delay_delivery import ScheduleDelivery
from kshim.storage.schedule.delay_intake import ScheduleIntake
from kshim.storage.schedule.delay_summary import ScheduleSummary


class DelayStore(ScheduleIntake, ScheduleDelivery, ScheduleSummary):
    """The durable schedule of delayed delivery, as the module says: one per data
    directory, its parts sharing one environment, bucket index and lock."""
