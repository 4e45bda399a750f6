"""Delayed delivery's durable schedule (QMQ's multi-level buckets, docs/references.md):
records pending in append-only bucket files by due time, with an LMDB environment of its
own beside them (``delay_store.py``)."""
