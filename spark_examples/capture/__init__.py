"""The capture: a source database's changes into one transactional kshim topic.

After the VENUS paper's upper adapter: triggers log every change of the captured tables with
a gap-free global sequence number, and the capture ships the log in order, one Kafka
transaction per batch, whose outcome the source database decides through the broker's
review hook (the paper's "half message" check).

- triggers.py: the change-log table, the sequence, and the triggers (SQLite, PostgreSQL);
- review.py: the capture's state in the source and the broker's review hook ``decide``;
- broker.py: the topic, the broker's hook setting, the transactional producer;
- shipper.py: the capture loop, ``run_capture``;
- __main__.py: ``python -m spark_examples.capture``.
"""
