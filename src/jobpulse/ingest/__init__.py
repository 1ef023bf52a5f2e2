"""Ingest: parsing batches of events into table columns, and committing them in groups."""

from .committer import Committer
from .parse import Batch, parse_body

__all__ = ["Batch", "Committer", "parse_body"]
