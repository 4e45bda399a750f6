"""What the transaction handlers read of the broker beyond the transaction coordinator,
as Protocols the Broker satisfies (api/services.py names each service; AddOffsetsToTxn,
EndTxn and the transaction listings read the transaction coordinator alone)."""

from __future__ import annotations

from typing import Protocol

from kshim.api.services import WithGroups, WithResolver, WithReviewer, WithTransactions


class TransactionsAndTopics(WithTransactions, WithResolver, Protocol):
    """AddPartitionsToTxn's: the transaction coordinator and the partitions named."""


class ProducerIds(WithTransactions, WithReviewer, Protocol):
    """InitProducerId's: the transaction coordinator and the review of transactions left
    open that it may consult."""


class TransactionalOffsets(WithTransactions, WithResolver, WithGroups, Protocol):
    """TxnOffsetCommit's: the transaction and group coordinators and the partitions named."""
