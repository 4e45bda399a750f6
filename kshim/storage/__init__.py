"""Storage: what the broker keeps on disk, in subpackages by what they hold.

- ``interface.py``: the ``PartitionLog`` and ``LogStore`` protocols in Kafka's words and
  the vocabulary every subpackage shares (``TopicPartition``, ``FileRegion``, the
  errors), with the pure planners the broker calls over a log's snapshot
  (``retention.py``: which segments go; ``compaction.py``: when the cleaner runs and how
  far). The protocol's methods speak in the planners' types, so they live beside it, at
  the top, below every subpackage.
- ``files/``: the one filesystem seam (``filesystem.py``), its simulated and
  fault-injecting twins for power-loss and disk-fault tests, and the data directory's
  lock. Apart from the log because the delay schedule's bucket files go through it too.
- ``log/``: the LSM log engine: segments, the write-ahead log, group commit,
  checkpoints, recovery, retention and compaction on disk, and the in-memory twin.
- ``meta/``: LMDB metadata (topics, log starts, committed offsets, transactions, ACLs,
  SCRAM credentials), every LMDB key layout (``lmdb_keys.py``) and the typed LMDB
  transactions every store uses (``lmdb_types.py``).
- ``schedule/``: delayed delivery's durable schedule (bucket files by due time, LMDB beside).
- ``views/``: the full-data view ``T.full``'s records, key index and tombstones in LMDB.

Imports point one way (``lint-imports``): ``schedule``, ``views`` -> ``log``, ``meta`` ->
``files`` -> the top-level modules -> ``kshim.protocol``.
"""
