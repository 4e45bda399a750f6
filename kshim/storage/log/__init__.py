"""The LSM log engine behind ``kshim.storage.interface``: every partition's appends go
through one write-ahead log with group commit, into memtables spilled to segment files
with sparse indexes; recovery, retention, log compaction, and the in-memory twin
(``memory_log.py``) that passes the same conformance suite."""
