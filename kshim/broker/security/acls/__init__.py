"""Kafka's ACLs in the broker: how they decide an action (matching.py), how they are
stored (records.py) and the broker's authoriser that keeps them durable (service.py).
Their vocabulary, which the admin client shares, is kshim/protocol/acls.py."""
