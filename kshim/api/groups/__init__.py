"""The consumer group APIs (FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup,
DescribeGroups, ListGroups, DeleteGroups) and committed offsets (OffsetCommit,
OffsetFetch, OffsetDelete), with their access rules (``access.py``, ``offset_access.py``)."""
