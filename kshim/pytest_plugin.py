"""kshim's pytest plugin: a real Kafka-protocol broker for a test suite, in place of a Kafka
container. Installing kshim registers it (the ``pytest11`` entry point ``kshim``), so its
fixtures need no configuration:

- ``kafka_bootstrap`` (session scope): the ``"host:port"`` bootstrap of one kshim broker for
  the whole run, its data in a temporary directory; or the cluster named by
  ``--kafka-bootstrap``, and then nothing is started.
- ``kafka_broker_factory`` (test scope): starts fresh brokers of the test's own, each on an
  empty data directory, with ``restart()``, ``stop()``, ``kill()`` (kill -9) and
  ``bootstrap`` (see kshim.testing.BrokerProcess); all are stopped when the test ends.

Options, from the command line or the ini file (the command line wins):

- ``--kshim-set KEY=VALUE`` (repeatable) / ``kshim_broker_config`` (one ``KEY=VALUE`` a line):
  broker settings, over TEST_DEFAULTS.
- ``--kshim-start-timeout SECONDS`` / ``kshim_start_timeout``: how long a start may take.
- ``--kafka-bootstrap HOST:PORT`` / ``kafka_bootstrap``: an external cluster for
  ``kafka_bootstrap``.

The terminal summary says how long each started broker took to accept connections.
Fixtures run in pytest's main thread; nothing here is thread-safe.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import pytest

from kshim.testing import START_TIMEOUT_S, BrokerProcess

# What a test suite's broker does differently from ``kshim serve``'s defaults. No metrics
# endpoint: brokers started side by side would compete for its port, and its HTTP server
# makes every clean stop wait up to half a second. No delay before a new consumer group's
# first rebalance, so that a group's first poll is served at once: Kafka's own test brokers
# do the same (TestUtils.createBrokerConfig sets group.initial.rebalance.delay.ms to 0).
TEST_DEFAULTS = ("kshim.metrics.listen=", "group.initial.rebalance.delay.ms=0")
BROKER_CONFIG_INI = "kshim_broker_config"
START_TIMEOUT_INI = "kshim_start_timeout"
EXTERNAL_BOOTSTRAP_INI = "kafka_bootstrap"
SettingValue = str | int | float | bool


@dataclass(frozen=True)
class PluginOptions:
    """The plugin's settings, read once from the command line and the ini file."""

    settings: tuple[str, ...]
    start_timeout_s: float
    external_bootstrap: str | None


@dataclass
class StartRecord:
    """The brokers each fixture started, for the terminal summary."""

    session_broker: BrokerProcess | None = None
    external_bootstrap: str | None = None
    factory_brokers: list[BrokerProcess] = field(default_factory=list)


OPTIONS_KEY = pytest.StashKey[PluginOptions]()
STARTS_KEY = pytest.StashKey[StartRecord]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("kshim", "kshim: a Kafka-protocol broker for tests")
    group.addoption(
        "--kshim-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help=f"a broker setting for the brokers kshim starts, over {BROKER_CONFIG_INI}",
    )
    group.addoption(
        "--kshim-start-timeout",
        type=float,
        metavar="SECONDS",
        help=f"how long a broker start may take (default {START_TIMEOUT_S:g})",
    )
    group.addoption(
        "--kafka-bootstrap",
        metavar="HOST:PORT",
        help="use this Kafka cluster for kafka_bootstrap instead of starting kshim",
    )
    parser.addini(BROKER_CONFIG_INI, "kshim broker settings, KEY=VALUE a line", type="linelist")
    parser.addini(START_TIMEOUT_INI, "seconds a kshim broker start may take", type="string")
    parser.addini(EXTERNAL_BOOTSTRAP_INI, "a Kafka cluster for kafka_bootstrap", type="string")


def pytest_configure(config: pytest.Config) -> None:
    """Reads the options; a malformed one stops the run before any test (UsageError)."""
    config.stash[OPTIONS_KEY] = read_options(config)
    config.stash[STARTS_KEY] = StartRecord()


def read_options(config: pytest.Config) -> PluginOptions:
    """The plugin's options; raises pytest.UsageError naming a malformed one."""
    from_ini: list[str] = config.getini(BROKER_CONFIG_INI)
    from_command_line: list[str] = config.getoption("kshim_set")
    for setting in (*from_ini, *from_command_line):
        if "=" not in setting:
            raise pytest.UsageError(f"kshim broker setting {setting!r}: expected KEY=VALUE")
    timeout = config.getoption("kshim_start_timeout")
    if timeout is None:
        timeout = _seconds(config.getini(START_TIMEOUT_INI) or str(START_TIMEOUT_S))
    if timeout <= 0:
        raise pytest.UsageError(f"kshim start timeout {timeout:g}: expected seconds above 0")
    external = config.getoption("kafka_bootstrap") or config.getini(EXTERNAL_BOOTSTRAP_INI)
    return PluginOptions(
        settings=(*TEST_DEFAULTS, *from_ini, *from_command_line),
        start_timeout_s=timeout,
        external_bootstrap=external.strip() or None,
    )


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise pytest.UsageError(f"{START_TIMEOUT_INI} = {text!r}: expected seconds") from None


@pytest.fixture(scope="session")
def kafka_bootstrap(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """The ``"host:port"`` bootstrap of one kshim broker shared by the whole test run, on a
    temporary data directory; the external cluster instead, untouched, when
    ``--kafka-bootstrap`` or ``kafka_bootstrap`` names one. Tests sharing it should use
    topic and group names of their own."""
    options = pytestconfig.stash[OPTIONS_KEY]
    starts = pytestconfig.stash[STARTS_KEY]
    if options.external_bootstrap is not None:
        starts.external_bootstrap = options.external_bootstrap
        yield options.external_bootstrap
        return
    directory = tmp_path_factory.mktemp("kshim-session")
    broker = BrokerProcess(directory / "data", options.settings, None, options.start_timeout_s)
    starts.session_broker = broker.start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


class BrokerFactory:
    """Starts fresh kshim brokers, each on an empty data directory of its own, and stops
    them all at ``stop_all``. Call it with settings for that broker, over the run's."""

    def __init__(
        self, tmp_path_factory: pytest.TempPathFactory, options: PluginOptions, starts: StartRecord
    ) -> None:
        self._tmp_path_factory = tmp_path_factory
        self._options = options
        self._starts = starts
        self._brokers: list[BrokerProcess] = []

    def __call__(self, settings: Mapping[str, SettingValue] | None = None) -> BrokerProcess:
        """A started broker; raises kshim.testing.BrokerExited (a bad setting) or
        TimeoutError, with the end of its log."""
        directory = self._tmp_path_factory.mktemp("kshim-broker")
        every_setting = [*self._options.settings, *_key_values(settings or {})]
        broker = BrokerProcess(
            directory / "data", every_setting, None, self._options.start_timeout_s
        )
        self._brokers.append(broker)
        self._starts.factory_brokers.append(broker)
        return broker.start()

    def stop_all(self) -> None:
        """Stops every broker this factory started (SIGTERM, then SIGKILL if one hangs)."""
        for broker in self._brokers:
            broker.stop()


def _key_values(settings: Mapping[str, SettingValue]) -> list[str]:
    """``{"num.partitions": 3, "auto.create.topics.enable": False}`` as kshim's ``--set``
    arguments (booleans in Kafka's lower case)."""
    return [f"{key}={_text(value)}" for key, value in settings.items()]


def _text(value: SettingValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@pytest.fixture
def kafka_broker_factory(
    pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[BrokerFactory]:
    """A factory of fresh kshim brokers (``kafka_broker_factory({"num.partitions": 3})``),
    all stopped when the test ends; see BrokerFactory and kshim.testing.BrokerProcess."""
    factory = BrokerFactory(
        tmp_path_factory, pytestconfig.stash[OPTIONS_KEY], pytestconfig.stash[STARTS_KEY]
    )
    try:
        yield factory
    finally:
        factory.stop_all()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Says how long the brokers this run started took to accept connections."""
    lines = summary_lines(terminalreporter.config.stash.get(STARTS_KEY, StartRecord()))
    if lines:
        terminalreporter.section("kshim", sep="-")
        for line in lines:
            terminalreporter.write_line(line)


def summary_lines(starts: StartRecord) -> list[str]:
    """The terminal summary's lines; none when no fixture of the plugin ran."""
    lines = []
    if starts.external_bootstrap is not None:
        lines.append(f"kafka_bootstrap: the external cluster at {starts.external_bootstrap}")
    broker = starts.session_broker
    if broker is not None and broker.started_in_s is not None:
        lines.append(
            f"kafka_bootstrap: kshim at {broker.bootstrap} started in "
            f"{broker.started_in_s:.2f} s (log: {broker.log_path})"
        )
    durations = [
        seconds for broker in starts.factory_brokers for seconds in broker.start_durations_s
    ]
    if durations:
        lines.append(
            f"kafka_broker_factory: {_count(len(starts.factory_brokers), 'broker')}, "
            f"{_count(len(durations), 'start')}, {_range(durations)} s each"
        )
    return lines


def _range(durations: Sequence[float]) -> str:
    low, high = min(durations), max(durations)
    return f"{low:.2f}" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f} to {high:.2f}"


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
