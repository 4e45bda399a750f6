"""End-to-end tests: real Kafka clients against a real ``kshim serve`` process."""
