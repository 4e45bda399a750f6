"""``kshim gateway``: a Kafka-protocol proxy in front of an Apache Kafka cluster.

Clients bootstrap to the gateway; every answer that names a broker's address (Metadata,
FindCoordinator, DescribeCluster) is rewritten to name a gateway address instead, one port
per upstream broker as Kroxylicious maps them, so that clients only ever talk to gateways.
Every other request and answer is relayed frame by frame, read no further than its header
(docs/gateway.md).
"""
