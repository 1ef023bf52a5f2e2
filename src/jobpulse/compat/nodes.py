"""What the compatible APIs count as one ModelArts task, PAI pod or Baseten node, in a job's nodes and ranks.

The vendors' APIs count machines. A job launched under node wrappers (``jobpulse run``) has node workers (kind
``node``): each samples its node's CPUs, memory and accelerators and logs its launcher's output, and the ranks
under it (workers whose ``node`` names it) log their own console. So a node worker is one unit, and its ranks
are part of it, not units of their own. Every worker that no registered node worker holds is a unit of its own:
a lone process, or a rank whose node never registered (a launcher run without the wrapper, whose ranks may
sample themselves). A job without node workers therefore counts each of its workers as one, as before ranks
had nodes.
"""

from __future__ import annotations

from ..store import Worker


def holders(workers: list[Worker]) -> dict[str, str]:
    """Each rank held by a registered node worker -> that node worker."""
    nodes = {w.worker for w in workers if w.kind == "node"}
    return {w.worker: w.node for w in workers if w.kind != "node" and w.node in nodes}


def units(workers: list[Worker]) -> list[str]:
    """The job's units (node workers and the workers no node worker holds), in worker order."""
    held = holders(workers)
    return [w.worker for w in workers if w.worker not in held]


def members(workers: list[Worker], unit: str) -> tuple[str, ...]:
    """A unit's workers: the unit itself, then the ranks it holds in worker order (a rank alone: itself)."""
    held = holders(workers)
    return (unit, *(w for w, node in held.items() if node == unit))


def unit_of(workers: list[Worker], worker: str) -> str:
    """The unit a worker belongs to: its node worker where one holds it, else itself."""
    return holders(workers).get(worker, worker)


def listed(workers: list[Worker], sampled: list[str]) -> tuple[list[str], int]:
    """The workers a per-unit answer lists, and how many of them are units: every unit, and any worker that has
    samples but is not registered (a unit too); then a held rank that has samples of its own, after them."""
    found = units(workers)
    registered = {w.worker for w in workers}
    found += [w for w in sampled if w not in registered and w not in found]
    count = len(found)
    return found + [w for w in sampled if w not in found], count
