"""Delayed delivery on a Kafka cluster: the gateways deliver the records of ``T.delay`` to
``T`` at their due time, exactly once, as members of one upstream consumer group
(docs/gateway.md, "Delayed delivery on Kafka")."""
