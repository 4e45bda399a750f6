"""Delayed delivery: a record produced to ``T.delay`` appears in ``T`` at the time its
producer chose (QMQ's delay service: docs/references.md).

``naming`` says which names are delay companions, ``requests`` what a record on one asks
for, ``ingest`` reads decided records of ``T.delay`` into the durable schedule
(storage/schedule/delay_store.py), ``dispatcher`` appends due records to ``T`` exactly once, and
``service`` holds the schedule's in-memory side and runs both.
"""
