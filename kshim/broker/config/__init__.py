"""Broker and topic configuration: the keys (``keys.py``), the merged broker configuration
(``broker_config.py``), a topic's effective configs (``topic_configs.py``) and how configs are
described (``describe.py``), Kafka's JAAS text (``jaas.py``). Changing a topic's configs
is ``kshim/api/admin/config_changes.py``'s, above the topics it changes."""
