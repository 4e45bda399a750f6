"""The group coordinator: classic consumer groups and their committed offsets.

``coordinator.GroupCoordinator`` runs JoinGroup, SyncGroup, Heartbeat and
LeaveGroup over ``group.Group`` bookkeeping, with the state table in
``group_states``; ``offset_commits`` answers OffsetCommit, OffsetFetch and
OffsetDelete, and ``admin`` ListGroups, DescribeGroups and DeleteGroups;
``offsets.OffsetManager`` keeps committed offsets (durable in LMDB);
``maintenance`` is the offset retention pass; ``consumption_status``
computes consumption status (committed offset, log end, lag). The handlers
only translate between these and the protocol's messages, as Kafka's KafkaApis
does for its GroupCoordinator.
"""
