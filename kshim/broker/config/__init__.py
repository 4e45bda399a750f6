"""Broker and topic configuration: the keys (``keys.py``), the merged broker configuration
(``broker_config.py``), how configs are described (``describe.py``) and changed (``changes.py``)."""
