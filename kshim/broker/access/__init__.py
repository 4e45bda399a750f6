"""ACL enforcement: one check per API, in front of its handler, with Kafka's rules.

Kafka decides who may do what in its request handlers (KafkaApis, AuthHelper, the
controller's ControllerApis); kshim keeps those decisions out of its handlers. Each API
has an access rule (``rules.py``), and the registry runs every handler behind its rule
(``guard.py``). A rule asks the authoriser (``security/acls/service.py``) about the
request's principal, answers what is refused with Kafka's error codes, and lets the
handler answer the rest, merging the two answers as Kafka does. With no authoriser
configured, or for a super user, the handler is called directly.
"""
