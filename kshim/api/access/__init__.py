"""ACL enforcement: one check per API, in front of its handler, with Kafka's rules.

Kafka decides who may do what in its request handlers (KafkaApis, AuthHelper, the
controller's ControllerApis); kshim keeps those decisions out of its handlers. Each API
has an access rule, beside its handler in the API's domain (``records/access.py``,
``groups/access.py``, ...), named in the API's row of the route table (``routes.py``),
which runs every handler behind its rule (``guard.py``). A rule asks the authoriser
(``broker/security/acls/service.py``) about the request's principal, answers what is
refused with Kafka's error codes, and lets the handler answer the allowed rest, merging
the two answers as Kafka does. With no authoriser configured, or for a super user, the
handler is called directly.
"""
