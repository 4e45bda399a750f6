"""Examples of Spark's stock Kafka connector talking to kshim, and the session helper they share."""
