"""Record-level features: compression codecs, headers, null keys and values, records near
``max.message.bytes``, and offsets by timestamp, across clients."""

from __future__ import annotations

import struct

import pytest

from compat_tests.brokers import BrokerUnderTest
from compat_tests.clients import CODECS, client_params, text_records
from compat_tests.deviations import TANSU_MAX_MESSAGE_BYTES, TANSU_TIMESTAMP_LOOKUP, deviates
from compat_tests.driver_confluent import ConfluentDriver
from compat_tests.drivers import driver
from compat_tests.support import (
    HALF,
    MESSAGE_TOO_LARGE,
    MIDDLE_OFFSET,
    RECORD_COUNT,
    create_topic,
    halves,
    reference,
    require_client,
)
from kshim.client.wire import WireConnection
from tests.e2e.client_helpers import (
    SampleRecord,
    expected_records,
    sample_records,
    timestamp_of,
)

pytestmark = pytest.mark.timeout(120)

ALL_CLIENTS = ("kafka-python", "aiokafka", "confluent", "kcat")
FETCH_KEY, FETCH_VERSION = 1, 4
COMPRESSION_MASK = 0x07  # record batch attributes bits 0-2
BATCH_ATTRIBUTES_AT = 21  # byte offset of the int16 attributes in a v2 batch header
BATCH_LENGTH_AT = 8  # after the int64 base offset
BATCH_LENGTH = struct.Struct(">i")  # bytes after the length field
BATCH_ATTRIBUTES = struct.Struct(">h")
# A v2 batch holding one record with a null key, no headers and a timestamp delta of 0
# takes 72 bytes besides the value, for values of 8 KiB to 1 MiB: the 61-byte batch header,
# a 3-byte record length, 5 one-byte fields, and a 3-byte value length.
ONE_RECORD_BATCH_OVERHEAD = 72
SMALL_LIMIT = 100_000
DEFAULT_LIMIT = 1_048_588  # Kafka's message.max.bytes default


def stored_codecs(broker: BrokerUnderTest, topic: str) -> list[int]:
    """The codec of every batch of partition 0, from a raw Fetch v4 (clients hide it)."""
    request = {
        "replica_id": -1,
        "max_wait": 500,  # a long poll, as clients send (see TANSU_IMMEDIATE_FETCH)
        "min_bytes": 1,
        "max_bytes": 1 << 24,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 24}],
            }
        ],
    }
    with WireConnection(broker.host, broker.port) as connection:
        response = connection.call(FETCH_KEY, FETCH_VERSION, request)
    [answer] = response.responses
    [partition] = answer.partitions
    assert int(partition.error_code) == 0
    records = bytes(partition.records or b"")
    codecs, position = [], 0
    while position < len(records):
        (length,) = BATCH_LENGTH.unpack_from(records, position + BATCH_LENGTH_AT)
        (attributes,) = BATCH_ATTRIBUTES.unpack_from(records, position + BATCH_ATTRIBUTES_AT)
        codecs.append(attributes & COMPRESSION_MASK)
        position += BATCH_LENGTH_AT + BATCH_LENGTH.size + length
    return codecs


@pytest.mark.compression
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("client", client_params(*ALL_CLIENTS))
def test_producer_compresses(broker: BrokerUnderTest, client: str, codec: str) -> None:
    """Each client compresses with each codec; the broker stores the batches as sent."""
    require_client(client)
    topic = create_topic(broker, f"codec-{client}-{codec}")
    records = text_records(RECORD_COUNT, with_nulls=False)
    # Repetitive values: librdkafka sends a batch uncompressed if compressing does not help.
    records = [
        SampleRecord(r.key, (r.value or b"") * 30, r.headers, r.timestamp_ms) for r in records
    ]

    driver(client).produce(broker.bootstrap, topic, halves(records), compression=codec)

    consumed = reference().consume(broker.bootstrap, topic, RECORD_COUNT)
    assert [(r.offset, r.key, r.value, r.headers) for r in consumed] == [
        (offset, r.key, r.value, r.headers) for offset, r in enumerate(records)
    ]
    assert set(stored_codecs(broker, topic)) == {CODECS.index(codec)}


@pytest.mark.compat_smoke
@pytest.mark.compression
@pytest.mark.parametrize("client", client_params(*ALL_CLIENTS))
def test_consumer_decompresses_every_codec(broker: BrokerUnderTest, client: str) -> None:
    """One partition holding a batch in each codec, written by librdkafka, read by ``client``."""
    require_client(client)
    topic = create_topic(broker, f"codecs-{client}")
    per_codec = 4
    records = text_records(per_codec * len(CODECS))
    writer = ConfluentDriver()
    for index, codec in enumerate(CODECS):
        batch = records[index * per_codec : (index + 1) * per_codec]
        offsets = writer.produce(broker.bootstrap, topic, [batch], compression=codec)
        assert offsets == list(range(index * per_codec, (index + 1) * per_codec))

    consumed = driver(client).consume(broker.bootstrap, topic, len(records))

    assert consumed == expected_records(records)


@pytest.mark.headers
@pytest.mark.null_records
@pytest.mark.parametrize("client", client_params("kafka-python", "aiokafka", "confluent"))
def test_headers_and_nulls_from_librdkafka(broker: BrokerUnderTest, client: str) -> None:
    """Null header values, repeated and binary headers, a null key with a null value."""
    topic = create_topic(broker, f"headers-{client}")
    records = sample_records(RECORD_COUNT, null_header_values=True, null_key_and_value=True)
    assert ConfluentDriver().produce(broker.bootstrap, topic, halves(records)) == list(
        range(RECORD_COUNT)
    )

    consumed = driver(client).consume(broker.bootstrap, topic, RECORD_COUNT)

    assert consumed == expected_records(records)
    assert consumed[5].headers == (("nullable", None), ("after-null", b"x"))
    assert (consumed[7].key, consumed[7].value) == (None, None)


def single_record(value_size: int) -> SampleRecord:
    return SampleRecord(None, b"v" * value_size, (), timestamp_of(0))


@pytest.mark.large_records
@deviates(TANSU_MAX_MESSAGE_BYTES)
@pytest.mark.parametrize("client", client_params("kafka-python", "aiokafka", "confluent"))
def test_record_batch_at_max_message_bytes(broker: BrokerUnderTest, client: str) -> None:
    """A batch of exactly max.message.bytes is stored; one byte more is MESSAGE_TOO_LARGE."""
    topic = create_topic(broker, f"limit-{client}", configs={"max.message.bytes": str(SMALL_LIMIT)})
    fits = single_record(SMALL_LIMIT - ONE_RECORD_BATCH_OVERHEAD)
    too_large = single_record(SMALL_LIMIT - ONE_RECORD_BATCH_OVERHEAD + 1)
    producer = driver(client)

    assert producer.produce(broker.bootstrap, topic, [[fits]]) == [0]
    with pytest.raises(Exception) as raised:
        producer.produce(broker.bootstrap, topic, [[too_large]])

    assert error_code_of(raised.value) == MESSAGE_TOO_LARGE
    [stored] = reference().consume(broker.bootstrap, topic, 1)
    assert (stored.offset, stored.value) == (0, fits.value)
    assert reference().watermarks(broker.bootstrap, topic) == (0, 1)


def error_code_of(error: BaseException) -> int:
    """The Kafka error code inside any client's exception."""
    errno = getattr(error, "errno", None)  # kafka-python and aiokafka errors
    if isinstance(errno, int):
        return errno
    args = getattr(error, "args", ())
    if args and hasattr(args[0], "code"):  # confluent-kafka KafkaError
        return int(args[0].code())
    raise AssertionError(f"no Kafka error code in {error!r}")


@pytest.mark.large_records
@pytest.mark.parametrize("client", client_params(*ALL_CLIENTS))
def test_consumer_reads_a_batch_larger_than_its_fetch_limit(
    broker: BrokerUnderTest, client: str
) -> None:
    """A batch of exactly the default max.message.bytes (1048588) exceeds every client's
    default per-partition fetch size (1 MiB), so the broker must return it whole (KIP-74)."""
    require_client(client)
    topic = create_topic(broker, f"large-{client}")
    big = single_record(DEFAULT_LIMIT - ONE_RECORD_BATCH_OVERHEAD)
    writer = ConfluentDriver()
    # librdkafka's own client-side limit (message.max.bytes, 1000000) is raised for this one.
    offsets = writer.produce(
        broker.bootstrap, topic, [[big]], settings={"message.max.bytes": 2 << 20}
    )
    assert offsets == [0]

    [consumed] = driver(client).consume(broker.bootstrap, topic, 1)

    size = len(big.value or b"")
    assert (consumed.offset, consumed.key, len(consumed.value or b"")) == (0, None, size)
    assert consumed.value == big.value


def timestamp_queries() -> list[tuple[int, int | None]]:
    """(timestamp asked for, offset the broker must answer): the first record at or after."""
    last = timestamp_of(RECORD_COUNT - 1)
    return [
        (timestamp_of(0) - 60_000, 0),
        (timestamp_of(MIDDLE_OFFSET) - 1, MIDDLE_OFFSET),
        (timestamp_of(MIDDLE_OFFSET), MIDDLE_OFFSET),  # inside the compressed batch
        (timestamp_of(HALF), HALF),
        (last, RECORD_COUNT - 1),
        (last + 1, None),
    ]


@pytest.mark.compat_smoke
@pytest.mark.timestamps
@deviates(TANSU_TIMESTAMP_LOOKUP)
@pytest.mark.parametrize("client", client_params(*ALL_CLIENTS))
def test_offsets_by_timestamp(broker: BrokerUnderTest, client: str) -> None:
    """ListOffsets by timestamp answers at record granularity, even in a compressed batch."""
    require_client(client)
    topic = create_topic(broker, f"times-{client}")
    records = text_records(RECORD_COUNT)
    first, second = halves(records)
    assert reference().produce(broker.bootstrap, topic, [first]) == list(range(HALF))
    assert reference().produce(broker.bootstrap, topic, [second], compression="gzip") == list(
        range(HALF, RECORD_COUNT)
    )
    client_driver = driver(client)

    answers = {
        timestamp: client_driver.offset_for_time(broker.bootstrap, topic, timestamp)
        for timestamp, _ in timestamp_queries()
    }

    assert answers == {
        timestamp: None if offset is None else (offset, timestamp_of(offset))
        for timestamp, offset in timestamp_queries()
    }
