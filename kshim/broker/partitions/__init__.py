"""The partition service: what the node does with its partitions, one operation each.

Kafka's ReplicaManager has this role: a Produce handler turns a request into appends and
their results into an answer; validating a batch, idempotence, the transaction check, the
append itself and the traffic counted are the service's (service.py, batch_checks.py).
Deleting a topic, with everything that goes with it, is one operation too.
"""
