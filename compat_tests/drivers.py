"""The driver for each client name (see clients.py for what every driver offers).

Each driver module is imported only when its client is asked for, since each pulls in its
client library; the driver modules import clients.py, never this module.
"""

from __future__ import annotations

from compat_tests.clients import AdminDriver, Driver


def driver(name: str) -> Driver:
    """The driver for client ``name``; raises ValueError for a client the suite lacks."""
    if name == "kcat":
        from compat_tests.driver_kcat import KcatDriver

        return KcatDriver()
    return admin_driver(name)


def admin_driver(name: str) -> AdminDriver:
    """The driver for client ``name``, which must have an admin API (kcat has none);
    raises ValueError otherwise."""
    if name == "kafka-python":
        from compat_tests.driver_kafka_python import KafkaPythonDriver

        return KafkaPythonDriver()
    if name == "aiokafka":
        from compat_tests.driver_aiokafka import AiokafkaDriver

        return AiokafkaDriver()
    if name == "confluent":
        from compat_tests.driver_confluent import ConfluentDriver

        return ConfluentDriver()
    raise ValueError(f"no client with an admin API is named {name!r}")
