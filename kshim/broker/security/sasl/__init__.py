"""The server side of the SASL mechanisms kshim offers, sans-io: each exchange takes the
client's tokens and returns the server's, and knows nothing of frames or sockets.

- PLAIN (RFC 4616, Kafka's PlainSaslServer): ``plain.py``;
- SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677, KIP-84): ``scram.py``, on scramp.

``factory.start_exchange`` starts the exchange of a mechanism by its name.
"""
