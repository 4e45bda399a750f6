"""The admin APIs of topics (CreateTopics, DeleteTopics, CreatePartitions,
DescribeProducers) and configs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs),
with their access rules (``topic_access.py``, ``config_access.py``)."""
