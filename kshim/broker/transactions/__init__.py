"""Transactions as half messages: the coordinator, per-partition state and review."""
