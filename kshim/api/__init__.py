"""Kafka's APIs over the broker's services, in KafkaApis' role: the route table
(``routes.py``: by API key, each API's request type, handler and access rule), the
request context (``context.py``), and the handlers grouped by domain, each domain's
access rules beside its handlers: ``records/`` (Produce, Fetch, ListOffsets, Metadata,
DeleteRecords), ``groups/`` (the consumer group APIs and committed offsets),
``transactions/`` (producer ids and transactions), ``admin/`` (topics, partitions,
configs, producers' state), ``security/`` (SASL, ACLs, SCRAM credentials); ``access/``
holds what every rule shares. A handler translates its request into calls on the
broker's services and their results into a response; it never touches sockets or files.
"""
