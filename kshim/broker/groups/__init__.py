"""The group coordinator: classic consumer groups and their committed offsets.

``coordinator.GroupCoordinator`` runs JoinGroup, SyncGroup, Heartbeat and
LeaveGroup over ``group.Group`` bookkeeping, with the state table in
``states``; ``offsets.OffsetManager`` keeps committed offsets (durable in
LMDB); ``maintenance`` runs the timers and offset retention; ``status``
computes consumption status (committed offset, log end, lag).
"""
