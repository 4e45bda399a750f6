"""Kafka error codes (Errors.java), re-exported from kio's generated enum."""

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode"]
