"""listeners, advertised.listeners and listener.security.protocol.map, as Kafka reads them."""

from __future__ import annotations

import pytest

from kshim.broker.config.broker_config import BrokerConfig
from kshim.broker.config.listeners import Listener
from kshim.broker.config.validators import ConfigError
from kshim.broker.endpoints import Endpoints


def load(**values: str) -> BrokerConfig:
    return BrokerConfig.load([{key.replace("_", "."): value for key, value in values.items()}])


def test_several_listeners_each_with_its_protocol() -> None:
    config = BrokerConfig.load(
        [
            {
                "listeners": "PLAINTEXT://:9092,SASL_SSL://127.0.0.1:9094,INTERNAL://[::1]:9095",
                "listener.security.protocol.map": (
                    "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,INTERNAL:SSL"
                ),
            }
        ]
    )
    assert config.listeners() == [
        Listener("PLAINTEXT", "PLAINTEXT", "0.0.0.0", 9092),
        Listener("SASL_SSL", "SASL_SSL", "127.0.0.1", 9094),
        Listener("INTERNAL", "SSL", "::1", 9095),
    ]
    assert config.listen_address() == ("0.0.0.0", 9092)


def test_a_bare_address_is_one_plaintext_listener() -> None:
    assert BrokerConfig.load([{"listeners": "127.0.0.1:9092"}]).listeners() == [
        Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092)
    ]


@pytest.mark.parametrize(
    ("listeners", "message"),
    [
        ("FOO://:9092", "not in listener.security.protocol.map"),
        ("PLAINTEXT://:9092,PLAINTEXT://:9093", "named twice"),
        ("PLAINTEXT://:9092,SSL://:9092", "two listeners"),
        ("PLAINTEXT://:99999", "port must be"),
        ("SSL://nowhere", "not host:port"),
    ],
)
def test_malformed_listeners_are_refused(listeners: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.load([{"listeners": listeners}])


def test_a_protocol_map_naming_an_unknown_protocol_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"listener\.security\.protocol\.map"):
        BrokerConfig.load([{"listener.security.protocol.map": "A:TLS"}])


def test_each_listener_is_advertised_at_its_own_address() -> None:
    config = BrokerConfig.load(
        [
            {
                "listeners": "PLAINTEXT://0.0.0.0:9092,SSL://0.0.0.0:9093",
                "advertised.listeners": "SSL://kshim.example:19093",
            }
        ]
    )
    endpoints = Endpoints(config)
    assert endpoints.address("SSL") == ("kshim.example", 19093)
    assert endpoints.address("PLAINTEXT") == ("127.0.0.1", 9092)


def test_an_advertised_listener_must_exist() -> None:
    with pytest.raises(ConfigError, match="advertised listener SSL"):
        BrokerConfig.load([{"listeners": "PLAINTEXT://:9092", "advertised.listeners": "SSL://h:1"}])


def test_port_zero_is_advertised_at_the_bound_port() -> None:
    endpoints = Endpoints(BrokerConfig.load([{"listeners": "SSL://127.0.0.1:0"}]))
    endpoints.bound("SSL", 40123)
    assert endpoints.address("SSL") == ("127.0.0.1", 40123)


def test_listener_overrides_win_over_the_broker_wide_value() -> None:
    config = BrokerConfig.load(
        [
            {
                "listeners": "SSL://:9093,SASL_SSL://:9094",
                "ssl.client.auth": "requested",
                "listener.name.sasl_ssl.ssl.client.auth": "required",
            }
        ]
    )
    assert config.listener_value("SASL_SSL", "ssl.client.auth") == "required"
    assert config.listener_value("SSL", "ssl.client.auth") == "requested"


def test_listener_overrides_are_validated() -> None:
    with pytest.raises(ConfigError, match=r"listener\.name\.ssl\.ssl\.client\.auth"):
        BrokerConfig.load([{"listener.name.ssl.ssl.client.auth": "always"}])


def test_only_tls_1_2_and_1_3_can_be_enabled() -> None:
    with pytest.raises(ConfigError, match=r"TLSv1\.1"):
        BrokerConfig.load([{"ssl.enabled.protocols": "TLSv1.1,TLSv1.2"}])
