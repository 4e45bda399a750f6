"""The APIs of producer ids and transactions (InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit, DescribeTransactions, ListTransactions), with
their access rules (``access.py``)."""
