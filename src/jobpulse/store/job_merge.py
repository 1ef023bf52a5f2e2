"""Merging the changes that several writers made to one job at the same time.

A job row is written whole: a writer reads the job, changes it, and writes it back. Two writers that read the
same version (two replicas of the server, or a request that edits a job outside the process's job lock) would
each write the job as they read it, and the later would undo the other's change. ``fold`` gives the job every
writer meant: each written state is compared with the state its writer read (the *base*), and what it changed
is applied, in the order the states were written:

- a field changed by one writer takes that writer's value; changed by several, the last one's;
- objects (the config) merge key by key, down to the leaves, so writers of different keys keep theirs;
- lists (tags, the items of a config) merge as sets: what a writer added is added, what it removed is removed,
  in the order of the state the merge starts from.
"""

from __future__ import annotations

from typing import Any

_ABSENT = object()


def fold(base: dict[str, Any], states: list[dict[str, Any]]) -> dict[str, Any]:
    """``base`` with the changes of each of ``states`` (written in this order, each read as ``base``)."""
    merged: Any = base
    for state in states:
        merged = merge(base, merged, state)
    return merged


def merge(base: Any, ours: Any, theirs: Any) -> Any:
    """``ours`` with what ``theirs`` changed from ``base`` (``theirs`` wins where both changed a value)."""
    if theirs == base:
        return ours
    if ours == base:
        return theirs
    if isinstance(ours, dict) and isinstance(theirs, dict):
        return _merge_objects(base if isinstance(base, dict) else {}, ours, theirs)
    if isinstance(ours, list) and isinstance(theirs, list):
        return _merge_lists(base if isinstance(base, list) else [], ours, theirs)
    return theirs


def _merge_objects(base: dict[str, Any], ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in [*ours, *(k for k in theirs if k not in ours)]:
        value = merge(base.get(key, _ABSENT), ours.get(key, _ABSENT), theirs.get(key, _ABSENT))
        if value is not _ABSENT:
            out[key] = value
    return out


def _merge_lists(base: list[Any], ours: list[Any], theirs: list[Any]) -> list[Any]:
    removed = [item for item in base if item not in theirs]
    kept = [item for item in ours if item not in removed]
    return kept + [item for item in theirs if item not in base and item not in kept]
