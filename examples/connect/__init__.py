"""Kafka Connect 3.9 distributed, with Debezium 3.2's PostgreSQL connector, against kshim (or
any Kafka broker).

- classpath.py: the jars, the ``connect`` set that kshim.jvm resolves from Maven Central into
  its cache (nothing is committed); ``python -m examples.connect.classpath`` prints them;
- worker.py: a worker's properties, its logging and its java command;
- run_connect.py: ``python -m examples.connect.run_connect``, one worker in the foreground;
- rest.py: Connect's REST API (create or update a connector, its status, waits);
- postgres_connector.py: the Debezium PostgreSQL connector's settings for a database URL,
  and ``python -m examples.connect.postgres_connector`` to register it.
"""
