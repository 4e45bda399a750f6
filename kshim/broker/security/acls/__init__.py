"""Kafka's ACLs: the model (model.py), how they decide an action (matching.py) and the
broker's authoriser that keeps them durable (service.py)."""
