"""The transaction coordinator's state machine, without sockets (TransactionCoordinator.scala's
handle* methods): transitions, fencing answers (KIP-98, KIP-588), markers, the review of an
open transaction on InitProducerId, and completion after a restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from kshim.broker.transactions.answers import ProducerIdAndEpoch, TransactionalOffset
from kshim.broker.transactions.coordinator import TransactionSettings
from kshim.broker.transactions.fencing import MAX_EPOCH
from kshim.broker.transactions.markers import ABORT, COMMIT
from kshim.broker.transactions.review_hooks import UNKNOWN
from kshim.broker.transactions.reviewer import ReviewSettings, TransactionReviewer
from kshim.broker.transactions.transaction_states import TransactionState as State
from kshim.protocol.errors import ErrorCode
from kshim.protocol.record_batch import TRANSACTIONAL_FLAG_MASK, BatchHeader, read_header
from kshim.protocol.records import BatchSpec, Record, build_batch
from kshim.storage.meta.transaction_store import AbortedTransaction, TransactionRecord
from kshim.testing import FakeClock
from tests.broker.transaction_support import (
    FIRST,
    GROUP,
    SECOND,
    START_MS,
    TIMEOUT_MS,
    TRANSACTIONAL_ID,
    UNKNOWN_PARTITION,
    Transactions,
)

MAX_TIMEOUT_MS = 300_000
ID_EXPIRATION_MS = 3_600_000


@pytest.fixture
async def txn(tmp_path: Path) -> AsyncIterator[Transactions]:
    settings = TransactionSettings(MAX_TIMEOUT_MS, ID_EXPIRATION_MS)
    transactions = Transactions(tmp_path, FakeClock(START_MS), settings)
    await transactions.open_logs()
    yield transactions
    await transactions.close()


# --------------------------------------------------------------------------------------
# InitProducerId
# --------------------------------------------------------------------------------------


async def test_init_producer_gives_a_new_id_then_bumps_its_epoch(txn: Transactions) -> None:
    first = await txn.init()
    assert first == ProducerIdAndEpoch(ErrorCode.none, first.producer_id, 0)
    assert txn.record().state == State.EMPTY
    second = await txn.init()  # a new instance: same id, the older one fenced
    assert second == ProducerIdAndEpoch(ErrorCode.none, first.producer_id, 1)
    assert await txn.init(second) == ProducerIdAndEpoch(ErrorCode.none, first.producer_id, 2)


@pytest.mark.parametrize("timeout_ms", [0, -1, MAX_TIMEOUT_MS + 1])
async def test_init_producer_refuses_a_timeout_out_of_range(
    txn: Transactions, timeout_ms: int
) -> None:
    answer = await txn.coordinator.init_producer(
        TRANSACTIONAL_ID, timeout_ms, -1, -1, _never, fenced_code=True
    )
    assert answer == ProducerIdAndEpoch(ErrorCode.invalid_transaction_timeout, -1, -1)
    assert TRANSACTIONAL_ID not in txn.coordinator.records


async def test_idempotent_producer_gets_a_new_id_or_its_next_epoch(txn: Transactions) -> None:
    coordinator = txn.coordinator
    new = await coordinator.init_producer(None, 0, -1, -1, _never, fenced_code=True)
    assert new.error == ErrorCode.none and new.producer_epoch == 0
    bumped = await coordinator.init_producer(None, 0, new.producer_id, 5, _never, fenced_code=True)
    assert bumped == ProducerIdAndEpoch(ErrorCode.none, new.producer_id, 6)
    last = MAX_EPOCH - 2
    exhausted = await coordinator.init_producer(
        None, 0, new.producer_id, last, _never, fenced_code=True
    )
    assert exhausted == ProducerIdAndEpoch(ErrorCode.none, new.producer_id, last + 1)
    renewed = await coordinator.init_producer(
        None, 0, new.producer_id, last + 1, _never, fenced_code=True
    )
    assert renewed.producer_id not in (new.producer_id, -1) and renewed.producer_epoch == 0


async def test_epoch_near_its_limit_moves_to_a_new_producer_id(txn: Transactions) -> None:
    producer = await txn.init()
    txn.record().producer_epoch = MAX_EPOCH - 2
    renewed = await txn.init()
    assert renewed.producer_id != producer.producer_id and renewed.producer_epoch == 0


# --------------------------------------------------------------------------------------
# Fencing: the same answers from every request naming a producer
# --------------------------------------------------------------------------------------

Request = Callable[[Transactions, int, int, bool], Awaitable[ErrorCode]]


async def _add_partitions(txn: Transactions, producer_id: int, epoch: int, new: bool) -> ErrorCode:
    errors = await txn.coordinator.add_partitions(
        TRANSACTIONAL_ID, producer_id, epoch, [FIRST, SECOND], txn.writable, fenced_code=new
    )
    assert len(set(errors.values())) == 1  # a fencing error applies to every partition
    return errors[FIRST]


async def _add_offsets(txn: Transactions, producer_id: int, epoch: int, new: bool) -> ErrorCode:
    return await txn.coordinator.add_offsets(
        TRANSACTIONAL_ID, producer_id, epoch, GROUP, fenced_code=new
    )


async def _commit_offsets(txn: Transactions, producer_id: int, epoch: int, new: bool) -> ErrorCode:
    offsets = [TransactionalOffset(FIRST, 5, -1, "")]
    return await txn.coordinator.commit_offsets(
        TRANSACTIONAL_ID,
        producer_id,
        epoch,
        GROUP,
        offsets,
        lambda: ErrorCode.none,
        fenced_code=new,
    )


async def _end(txn: Transactions, producer_id: int, epoch: int, new: bool) -> ErrorCode:
    return await txn.coordinator.end_transaction(
        TRANSACTIONAL_ID, producer_id, epoch, True, fenced_code=new
    )


async def _init(txn: Transactions, producer_id: int, epoch: int, new: bool) -> ErrorCode:
    answer = await txn.coordinator.init_producer(
        TRANSACTIONAL_ID, TIMEOUT_MS, producer_id, epoch, _never, fenced_code=new
    )
    return answer.error


REQUESTS = [_add_partitions, _add_offsets, _commit_offsets, _end, _init]


@pytest.mark.parametrize("request_", REQUESTS)
async def test_fencing_answers(txn: Transactions, request_: Request) -> None:
    if request_ is not _init:  # InitProducerId creates an unknown id
        assert await request_(txn, 7, 0, True) == ErrorCode.invalid_producer_id_mapping
    zombie = await txn.init()
    current = await txn.init()
    before = txn.record().producer_epoch
    pid = current.producer_id
    assert await request_(txn, pid, zombie.producer_epoch, True) == ErrorCode.producer_fenced
    # Versions before KIP-588 know no PRODUCER_FENCED.
    assert await request_(txn, pid, zombie.producer_epoch, False) == (
        ErrorCode.invalid_producer_epoch
    )
    assert await request_(txn, pid, current.producer_epoch + 1, True) == (
        ErrorCode.invalid_producer_epoch
    )
    assert await request_(txn, pid + 1, current.producer_epoch, True) == (
        ErrorCode.invalid_producer_id_mapping
    )
    assert txn.record().producer_epoch == before
    assert txn.record().state == State.EMPTY


# --------------------------------------------------------------------------------------
# AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit
# --------------------------------------------------------------------------------------


async def test_add_partitions_opens_the_transaction(txn: Transactions) -> None:
    producer = await txn.init()
    txn.clock.now_ms = START_MS + 5
    errors = await txn.add(producer, FIRST, FIRST, SECOND)
    assert errors == {FIRST: ErrorCode.none, SECOND: ErrorCode.none}
    record = txn.record()
    assert record.state == State.ONGOING
    assert record.partitions == [("t", 0), ("t", 1)]  # each once
    assert (record.started_ms, record.next_review_ms) == (START_MS + 5, START_MS + 5 + TIMEOUT_MS)
    txn.clock.now_ms = START_MS + 50  # adding more keeps the start and review time
    assert await txn.add(producer, FIRST) == {FIRST: ErrorCode.none}
    assert txn.record().started_ms == START_MS + 5


async def test_unknown_partition_adds_nothing(txn: Transactions) -> None:
    producer = await txn.init()
    errors = await txn.add(producer, FIRST, UNKNOWN_PARTITION)
    assert errors == {
        FIRST: ErrorCode.operation_not_attempted,
        UNKNOWN_PARTITION: ErrorCode.unknown_topic_or_partition,
    }
    assert txn.record().state == State.EMPTY and txn.record().partitions == []


async def test_transactional_offsets_need_add_offsets_and_apply_on_commit(
    txn: Transactions,
) -> None:
    producer = await txn.begin(FIRST)
    assert await _commit_offsets(txn, producer.producer_id, producer.producer_epoch, True) == (
        ErrorCode.invalid_txn_state
    )  # AddOffsetsToTxn did not add the group
    assert await _add_offsets(txn, producer.producer_id, producer.producer_epoch, True) == (
        ErrorCode.none
    )
    assert await _commit_offsets(txn, producer.producer_id, producer.producer_epoch, True) == (
        ErrorCode.none
    )
    assert txn.coordinator.pending_offsets(GROUP) == {FIRST}
    assert await txn.end(producer, commit=True) == ErrorCode.none
    assert txn.completed == [(True, [[GROUP, "t", 0, 5, -1, ""]])]
    assert txn.coordinator.pending_offsets(GROUP) == set()
    record = txn.record()
    assert (record.groups, record.pending_offsets, record.partitions) == ([], [], [])


async def test_aborted_offsets_are_dropped(txn: Transactions) -> None:
    producer = await txn.init()
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert await _add_offsets(txn, pid, epoch, True) == ErrorCode.none
    assert txn.record().state == State.ONGOING  # offsets alone open a transaction
    assert await _commit_offsets(txn, pid, epoch, True) == ErrorCode.none
    assert await txn.end(producer, commit=False) == ErrorCode.none
    assert txn.record().state == State.COMPLETE_ABORT
    assert txn.completed == [(False, [[GROUP, "t", 0, 5, -1, ""]])]
    assert txn.coordinator.pending_offsets(GROUP) == set()


# --------------------------------------------------------------------------------------
# EndTxn
# --------------------------------------------------------------------------------------


async def test_commit_writes_a_marker_everywhere_and_a_retry_succeeds(txn: Transactions) -> None:
    producer = await txn.begin(FIRST, SECOND)
    assert txn.coordinator.partition(FIRST).last_stable_offset(txn.log(FIRST).high_watermark) == 0
    assert await txn.end(producer, commit=True) == ErrorCode.none
    assert txn.record().state == State.COMPLETE_COMMIT
    for partition in (FIRST, SECOND):
        assert await txn.markers(partition) == [(1, COMMIT)]
        state = txn.coordinator.partition(partition)
        assert state.open == {} and state.aborted == []
        assert state.last_stable_offset(txn.log(partition).high_watermark) == 2
    assert await txn.end(producer, commit=True) == ErrorCode.none  # a retry: no new marker
    assert await txn.markers(FIRST) == [(1, COMMIT)]
    assert await txn.end(producer, commit=False) == ErrorCode.invalid_txn_state
    assert txn.record().state == State.COMPLETE_COMMIT


async def test_abort_indexes_the_aborted_transaction(txn: Transactions) -> None:
    producer = await txn.begin(FIRST)
    assert await txn.end(producer, commit=False) == ErrorCode.none
    assert await txn.markers(FIRST) == [(1, ABORT)]
    expected = [AbortedTransaction(producer.producer_id, 0, 1)]
    assert txn.coordinator.partition(FIRST).aborted == expected
    assert await asyncio.to_thread(txn.metadata.transactions.aborted, FIRST) == expected
    assert await txn.end(producer, commit=False) == ErrorCode.none
    assert await txn.end(producer, commit=True) == ErrorCode.invalid_txn_state


async def test_ending_a_transaction_that_added_nothing_is_refused(txn: Transactions) -> None:
    """Kafka's TransactionCoordinator.endTransaction refuses state Empty either way; clients
    end such a transaction without asking (tests/e2e/test_transactions.py)."""
    producer = await txn.init()
    assert await txn.end(producer, commit=True) == ErrorCode.invalid_txn_state
    assert await txn.end(producer, commit=False) == ErrorCode.invalid_txn_state
    assert txn.record().state == State.EMPTY
    assert await txn.markers(FIRST) == []


async def test_concurrent_end_txn_writes_the_markers_once(txn: Transactions) -> None:
    producer = await txn.begin(FIRST)
    answers = await asyncio.gather(txn.end(producer, True), txn.end(producer, True))
    assert list(answers) == [ErrorCode.none, ErrorCode.none]
    assert await txn.markers(FIRST) == [(1, COMMIT)]


async def test_preparing_answers_concurrent_transactions_until_restart_completes_it(
    txn: Transactions,
) -> None:
    """The background retries are not running here: a restart completes it as well
    (test_transaction_marker_retries.py: without one)."""
    producer = await txn.begin(FIRST)
    await txn.fail_writes(FIRST)  # the marker's write fails: the transaction stays prepared
    assert await txn.end(producer, commit=True) == ErrorCode.none  # decided, as in Kafka
    assert txn.record().state == State.PREPARE_COMMIT
    pid, epoch = producer.producer_id, producer.producer_epoch
    assert await _add_partitions(txn, pid, epoch, True) == ErrorCode.concurrent_transactions
    assert await _add_offsets(txn, pid, epoch, True) == ErrorCode.concurrent_transactions
    assert await _end(txn, pid, epoch, True) == ErrorCode.concurrent_transactions
    # The other outcome than the one decided (Kafka's endTransaction from PrepareCommit).
    assert await txn.end(producer, commit=False) == ErrorCode.invalid_txn_state
    assert await _commit_offsets(txn, pid, epoch, True) == ErrorCode.invalid_txn_state
    assert await _init(txn, pid, epoch, True) == ErrorCode.concurrent_transactions

    await txn.restart()
    assert txn.record().state == State.COMPLETE_COMMIT
    assert await txn.markers(FIRST) == [(1, COMMIT)]
    assert await txn.end(producer, commit=True) == ErrorCode.none  # the client's retry


# --------------------------------------------------------------------------------------
# An open transaction when a new instance calls InitProducerId: reviewed first
# --------------------------------------------------------------------------------------


def _reviewer(txn: Transactions, decisions: list[str] | None) -> TransactionReviewer:
    """A reviewer whose hook answers ``decisions`` in turn (None: no hook, abort)."""

    async def hook(_request: dict[str, object]) -> str:
        assert decisions
        return decisions.pop(0)

    return TransactionReviewer(
        txn.coordinator, None if decisions is None else hook, ReviewSettings()
    )


async def test_new_instance_waits_for_the_review_then_fences_the_old_one(
    txn: Transactions,
) -> None:
    old = await txn.begin(FIRST)
    reviewer = _reviewer(txn, [UNKNOWN, "commit"])
    waiting = await txn.init(review=reviewer.resolve)
    assert waiting == ProducerIdAndEpoch(ErrorCode.concurrent_transactions, -1, -1)
    assert txn.record().state == State.ONGOING and txn.record().reviews == 1

    new = await txn.init(review=reviewer.resolve)
    # The review's decision bumped the epoch once, the new instance once more.
    assert new == ProducerIdAndEpoch(ErrorCode.none, old.producer_id, old.producer_epoch + 2)
    assert await txn.markers(FIRST) == [(1, COMMIT)]
    assert txn.record().state == State.EMPTY
    assert await txn.end(old, commit=False) == ErrorCode.producer_fenced  # too late


async def test_without_a_hook_the_new_instance_aborts_the_open_transaction(
    txn: Transactions,
) -> None:
    await txn.begin(FIRST)
    new = await txn.init(review=_reviewer(txn, None).resolve)
    assert new.error == ErrorCode.none
    assert await txn.markers(FIRST) == [(1, ABORT)]


# --------------------------------------------------------------------------------------
# Produce checks, DescribeTransactions, ListTransactions, restart and expiry
# --------------------------------------------------------------------------------------


async def test_check_produce(txn: Transactions) -> None:
    producer = await txn.begin(FIRST)
    coordinator = txn.coordinator
    header = _header(producer.producer_id, producer.producer_epoch)
    assert coordinator.check_produce(TRANSACTIONAL_ID, header, FIRST) == ErrorCode.none
    assert coordinator.check_produce(TRANSACTIONAL_ID, header, SECOND) == (
        ErrorCode.invalid_txn_state
    )  # not added
    assert coordinator.check_produce(None, header, FIRST) == ErrorCode.invalid_producer_id_mapping
    stranger = _header(producer.producer_id + 1, producer.producer_epoch)
    assert coordinator.check_produce(TRANSACTIONAL_ID, stranger, FIRST) == (
        ErrorCode.invalid_producer_id_mapping
    )
    await txn.init(review=_reviewer(txn, None).resolve)
    assert coordinator.check_produce(TRANSACTIONAL_ID, header, FIRST) == (
        ErrorCode.invalid_producer_epoch
    )


async def test_describe_and_list_transactions(txn: Transactions) -> None:
    assert txn.coordinator.describe(TRANSACTIONAL_ID) is None
    producer = await txn.begin(FIRST, SECOND)
    described = txn.coordinator.describe(TRANSACTIONAL_ID)
    assert described is not None
    assert (described.state, described.partitions) == (State.ONGOING, (FIRST, SECOND))
    assert (described.producer_id, described.producer_epoch) == (producer.producer_id, 0)
    assert (described.timeout_ms, described.started_ms) == (TIMEOUT_MS, START_MS)
    listed = txn.coordinator.list_transactions
    assert [found.transactional_id for found in listed([], [])] == [TRANSACTIONAL_ID]
    assert listed([State.ONGOING], [producer.producer_id]) == [described]
    assert listed([State.EMPTY], []) == []
    assert listed([], [producer.producer_id + 1]) == []


async def test_transactions_survive_a_restart(txn: Transactions) -> None:
    producer = await txn.begin(FIRST)
    await txn.restart()
    assert txn.record().state == State.ONGOING
    state = txn.coordinator.partition(FIRST)
    assert state.open[producer.producer_id].first_offset == 0
    assert state.transaction_start_offset(producer.producer_id) == 0  # DescribeProducers'
    assert await txn.end(producer, commit=True) == ErrorCode.none
    assert await txn.markers(FIRST) == [(1, COMMIT)]
    assert state.transaction_start_offset(producer.producer_id) == -1


async def test_idle_completed_ids_expire(txn: Transactions) -> None:
    await txn.init()
    txn.clock.now_ms += ID_EXPIRATION_MS + 1
    assert await txn.coordinator.expire_idle() == 1
    assert txn.coordinator.describe(TRANSACTIONAL_ID) is None
    await txn.begin(FIRST)  # open transactions never expire
    txn.clock.now_ms += ID_EXPIRATION_MS + 1
    assert await txn.coordinator.expire_idle() == 0


async def _never(_record: TransactionRecord, _reason: str) -> bool:
    raise AssertionError("no open transaction to review")


def _header(producer_id: int, epoch: int) -> BatchHeader:
    spec = BatchSpec(
        attributes=TRANSACTIONAL_FLAG_MASK, producer_id=producer_id, producer_epoch=epoch
    )
    return read_header(build_batch([Record(0, START_MS, None, b"v")], spec))
