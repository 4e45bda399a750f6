"""The full-data view ``T.full``'s durable state: each key's live record, the key index and
the tombstones still kept, in an LMDB environment of its own (``full_view_store.py``)."""
