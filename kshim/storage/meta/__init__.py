"""The broker's metadata in LMDB: topics, log start offsets, cleaner checkpoints, committed
offsets, transactions, ACLs and SCRAM credentials (``metadata.py`` opens the environment);
every LMDB key layout of kshim, this package's and the schedule's and the view's
(``lmdb_keys.py``); the typed LMDB transactions every store uses, and the one error an
LMDB failure becomes (``lmdb_types.py``)."""
