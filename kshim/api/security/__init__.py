"""The APIs of security itself: SASL (SaslHandshake, SaslAuthenticate), ACLs
(DescribeAcls, CreateAcls, DeleteAcls) and SCRAM credentials (KIP-554), with their access
rules (``access.py``)."""
