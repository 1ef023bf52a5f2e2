"""The bounds a JSON-lines body is held to before any parser reads a byte of it (see docs/ingest.md, "Limits").

A scan of the bytes with numpy finds the lines, refuses a body of more events than a batch holds, and refuses a
line longer than ``MAX_LINE_BYTES`` or nested deeper than ``MAX_DEPTH``: orjson and Arrow's JSON reader then only
ever see lines they parse in bounded time and stack. Nesting is bounded cheaply first (a line cannot be nested deeper
than it has ``[`` and ``{`` bytes); only a line with more of them than ``MAX_DEPTH`` is scanned exactly, with the
brackets inside strings left out. The scan reads the body in slices of ``_SLICE`` bytes, so that its memory stays
small whatever the body holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import BadRequest, PayloadTooLarge

MAX_DEPTH = 64  # arrays and objects inside one another, the event's own object included
MAX_LINE_BYTES = 8 << 20  # room for the largest log line (1 Mi characters, each escaped) or plot (4 MiB)
_SLICE = 1 << 20
_NEWLINE, _QUOTE, _BACKSLASH = 0x0A, 0x22, 0x5C
_OPEN, _CLOSE = 0x7B, 0x7D  # '{' and '}'; '[' and ']' read the same once bit 0x20 is set
_BLANKS = b" \t\r"


@dataclass
class Lines:
    """The lines of a body that hold an event (blank lines hold none), as byte ranges without their surrounding
    blanks; ``refused`` lists the lines past a limit, as (line numbers, reason, detail)."""

    starts: np.ndarray
    ends: np.ndarray
    refused: list[tuple[np.ndarray, str, str]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.starts)

    def objects(self, data: bytes) -> bool:
        """Whether every line starts with '{' and ends with '}', and none was refused."""
        if self.refused or not len(self):
            return False
        text = np.frombuffer(data, np.uint8)
        return bool((text[self.starts] == _OPEN).all() and (text[self.ends - 1] == _CLOSE).all())


def scan_lines(data: bytes, max_events: int) -> Lines:
    """The lines of ``data``; raises PayloadTooLarge past ``max_events`` lines and BadRequest where there are none."""
    text = np.frombuffer(data, np.uint8)
    starts, ends, opens = [], [], []
    line_start, carried, count = 0, 0, 0
    for at in range(0, len(text), _SLICE):
        part = text[at : at + _SLICE]
        breaks = np.flatnonzero(part == _NEWLINE)
        per_line = _opening_per_line(part, breaks)
        breaks += at
        per_line[0] += carried
        if len(breaks):
            first = np.concatenate(([line_start], breaks[:-1] + 1))
            kept = _trimmed(data, text, first, breaks)
            starts.append(kept[0])
            ends.append(kept[1])
            opens.append(per_line[:-1][kept[2]])
            count += len(kept[0])
            if count > max_events:
                raise PayloadTooLarge(f"a batch holds at most {max_events} events", field="body")
            line_start = int(breaks[-1]) + 1
        carried = int(per_line[-1])
    last = _trimmed(data, text, np.array([line_start]), np.array([len(text)]))
    starts.append(last[0])
    ends.append(last[1])
    opens.append(np.array([carried])[last[2]])
    lines = Lines(np.concatenate(starts).astype(np.int64), np.concatenate(ends).astype(np.int64))
    if not len(lines):
        raise BadRequest("body holds no events", field="body")
    if len(lines) > max_events:
        raise PayloadTooLarge(f"a batch holds at most {max_events} events", field="body")
    _refuse_long_and_deep(data, lines, np.concatenate(opens))
    return lines


def _opening_per_line(part: np.ndarray, breaks: np.ndarray) -> np.ndarray:
    """At most how many '{' and '[' each piece of ``part`` between its line breaks holds (the last piece may be
    empty): a bound, counted exactly only where it could pass MAX_DEPTH.

    Each piece that starts with one holds at least that one, so none of the pieces holds more than the part's total
    less the others that start with one: where that is small, no piece needs counting.
    """
    opening = (part | 0x20) == _OPEN
    pieces = np.concatenate(([0], breaks + 1))
    filled = pieces < len(part)  # a piece after a break that ends the part holds nothing
    total = int(np.count_nonzero(opening))
    starting = int(np.count_nonzero(opening[pieces[1:][filled[1:]]]))  # the pieces after a break that start with one
    bounds = np.full(len(pieces), total - starting + 1, dtype=np.int64)
    bounds[0] = total - starting  # the first piece goes on from the part before: it is not among those counted
    if bounds.max() <= MAX_DEPTH:  # no line can be too deep here (but for what the first held before)
        return np.minimum(bounds, total)
    counts = np.zeros(len(pieces), dtype=np.int64)
    counts[filled] = np.add.reduceat(opening, pieces[filled], dtype=np.int64)
    return counts


def _trimmed(data: bytes, text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple:
    """The ranges without their leading and trailing blanks, the blank ones left out, and which were kept."""
    starts, ends = starts.copy(), ends.copy()
    for _ in range(4):  # a carriage return, a space or two: a few steps of every line at once
        lead, trail = _blank_ends(text, starts, ends)
        if not lead.any() and not trail.any():
            break
        starts += lead
        ends -= trail & (starts < ends)
    else:  # longer runs of blanks, line by line
        lead, trail = _blank_ends(text, starts, ends)
        for i in np.flatnonzero(lead | trail).tolist():
            line = data[starts[i] : ends[i]]
            starts[i] += len(line) - len(line.lstrip(_BLANKS))
            ends[i] -= len(line) - len(line.rstrip(_BLANKS)) if starts[i] < ends[i] else 0
    kept = starts < ends
    return starts[kept], ends[kept], kept


def _blank_ends(text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which ranges start with a blank, and which end with one."""
    if not len(text):
        return np.zeros(len(starts), dtype=bool), np.zeros(len(starts), dtype=bool)
    filled = starts < ends
    return filled & _is_blank(text[np.minimum(starts, len(text) - 1)]), filled & _is_blank(
        text[np.maximum(ends - 1, 0)]
    )


def _is_blank(values: np.ndarray) -> np.ndarray:
    return (values == 0x20) | (values == 0x09) | (values == 0x0D)


def _refuse_long_and_deep(data: bytes, lines: Lines, opens: np.ndarray) -> None:
    long = (lines.ends - lines.starts) > MAX_LINE_BYTES
    if long.any():
        detail = f"a line is at most {MAX_LINE_BYTES} bytes"
        lines.refused.append((np.flatnonzero(long), "line_too_long", detail))
    maybe = np.flatnonzero((opens > MAX_DEPTH) & ~long)
    if not len(maybe):
        return
    depths = nesting(data, lines.starts[maybe], lines.ends[maybe])
    deep = maybe[depths > MAX_DEPTH]
    if len(deep):
        detail = f"an event is nested at most {MAX_DEPTH} arrays or objects deep"
        lines.refused.append((deep, "too_deep", detail))


def depth(text: bytes | str) -> int:
    """How deep the arrays and objects of JSON ``text`` nest (the brackets inside strings left out): linear in its
    size, without recursion, for any JSON text a request carries (a plot, a ClearML body, a job's config)."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if not data:
        return 0
    return int(nesting(data, np.array([0]), np.array([len(data)]))[0])


def nesting(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How deep arrays and objects nest in each range of ``data`` (the brackets inside strings left out).

    Short ranges are read in groups of about ``_SLICE`` bytes, a longer one a slice at a time; a malformed range
    may read deeper than a parser would get before it fails, never shallower.
    """
    depths = np.zeros(len(starts), dtype=np.int64)
    long = np.flatnonzero(ends - starts > _SLICE)
    for i in long.tolist():
        depths[i] = _nesting_of_long(data, int(starts[i]), int(ends[i]))
    short = np.flatnonzero(ends - starts <= _SLICE)
    group = 0
    while group < len(short):
        first = starts[short[group]]
        last = group + max(1, int(np.searchsorted(ends[short], first + _SLICE, side="right")) - group)
        at = short[group:last]
        depths[at] = _nesting_of_group(data, starts[at], ends[at])
        group = last
    return depths


def _nesting_of_long(data: bytes, start: int, end: int) -> int:
    """The depth of one long range, read a slice at a time: whether a string is open, the backslashes that end the
    slice and the level are carried from one slice to the next."""
    deepest = level = 0
    in_string, slashes = False, 0
    for at in range(start, end, _SLICE):
        part = np.frombuffer(data, np.uint8, count=min(_SLICE, end - at), offset=at)
        folded = part | 0x20
        found = np.flatnonzero((part == _QUOTE) | (part == _BACKSLASH) | (folded == _OPEN) | (folded == _CLOSE))
        byte = part[found]
        quotes = _unescaped_quotes(found, byte, carried=slashes)
        brackets = found[(byte != _QUOTE) & (byte != _BACKSLASH)]
        outside = ((np.searchsorted(quotes, brackets) + in_string) & 1) == 0
        steps = np.where((part[brackets[outside]] | 0x20) == _OPEN, 1, -1)
        if len(steps):
            levels = level + np.cumsum(steps)
            deepest, level = max(deepest, int(levels.max())), int(levels[-1])
        in_string ^= bool(len(quotes) & 1)
        trailing = len(part) - len(part.tobytes().rstrip(b"\\"))
        slashes = trailing + slashes if trailing == len(part) else trailing
    return deepest


def _nesting_of_group(data: bytes, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    base = int(starts[0])
    part = np.frombuffer(data, np.uint8, count=int(ends[-1]) - base, offset=base)
    folded = part | 0x20
    at = np.flatnonzero((part == _QUOTE) | (part == _BACKSLASH) | (folded == _OPEN) | (folded == _CLOSE))
    line = np.searchsorted(starts - base, at, side="right") - 1
    inside = at < ends[line] - base
    at, line = at[inside], line[inside]
    byte = part[at]
    quotes = _unescaped_quotes(at, byte)
    brackets = byte != _QUOTE
    brackets &= byte != _BACKSLASH
    at, line, byte = at[brackets], line[brackets], byte[brackets]
    # a bracket is inside a string where an odd number of quotes of its line come before it
    before = np.searchsorted(quotes, at) - np.searchsorted(quotes, starts[line] - base)
    outside = (before & 1) == 0
    line, step = line[outside], np.where((byte[outside] | 0x20) == _OPEN, 1, -1)
    depths = np.zeros(len(starts), dtype=np.int64)
    if not len(step):
        return depths
    level = np.cumsum(step)
    first = np.flatnonzero(np.concatenate(([True], line[1:] != line[:-1])))
    level -= np.repeat(level[first] - step[first], np.diff(np.append(first, len(step))))
    depths[line[first]] = np.maximum(np.maximum.reduceat(level, first), 0)
    return depths


def _unescaped_quotes(at: np.ndarray, byte: np.ndarray, carried: int = 0) -> np.ndarray:
    """The positions of the quotes that are not escaped: those after an even run of backslashes (or none).
    ``carried`` backslashes come before ``at``'s first position (the end of the slice before)."""
    quotes = at[byte == _QUOTE]
    slashes = at[byte == _BACKSLASH]
    if not len(slashes) and not carried:
        return quotes
    after = np.searchsorted(slashes, quotes - 1)
    found = after < len(slashes)
    follows = np.zeros(len(quotes), dtype=bool)
    follows[found] = slashes[after[found]] == quotes[found] - 1
    run = np.zeros(len(quotes), dtype=np.int64)
    if follows.any():
        # the first backslash of each run of consecutive ones, for every backslash
        run_start = np.concatenate(([True], np.diff(slashes) != 1))
        first = slashes[np.maximum.accumulate(np.where(run_start, np.arange(len(slashes)), 0))]
        run[follows] = quotes[follows] - first[after[follows]]
    if carried:  # positions are the slice's: a run that starts at 0 goes on from the slice before
        run[follows & (quotes == run)] += carried
        run[quotes == 0] = carried
    return quotes[(run & 1) == 0]
