"""kshim with other Kafka tooling, runnable from the repository root.

- connect/: Kafka Connect 3.9 in distributed mode and the Debezium PostgreSQL connector
  against kshim (``python -m examples.connect.run_connect``); see docs/connect.md.
"""
