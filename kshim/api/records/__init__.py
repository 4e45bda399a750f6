"""The APIs that write, read and describe topics' records: Produce, Fetch, ListOffsets,
Metadata and DeleteRecords, with their access rules (``access.py``)."""
