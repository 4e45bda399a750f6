"""Kafka's MirrorMaker 2 copying a kshim broker's topics to an Apache Kafka cluster."""
