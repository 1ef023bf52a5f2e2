"""The bounds a JSON-lines body is held to before any parser reads a byte of it (see docs/ingest.md, "Limits").

A scan of the bytes with numpy finds the lines, refuses a body of more events than a batch holds, and refuses a
line longer than ``MAX_LINE_BYTES`` or nested deeper than ``MAX_DEPTH``: orjson and Arrow's JSON reader then only
ever see lines they parse in bounded time and stack.

Nesting is bounded cheaply first. A line cannot be nested deeper than it has ``[`` and ``{`` bytes, and every other
line that starts with one holds at least that one: so no line holds more than the body's count of them less the
lines that start with one, plus one. Where that is at most ``MAX_DEPTH`` (a body of flat events), nothing more is
read; otherwise each line's count is taken, and only a line with more than ``MAX_DEPTH`` is scanned exactly, with
the brackets inside strings left out. The scan reads the body in slices of ``_SLICE`` bytes, each read whole while
it is in the processor's cache, so that its memory stays small whatever the body holds; on the way it notes what
the reader of a whole body asks of it (is it ASCII, does it hold a backslash), so that no other pass reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import BadRequest, PayloadTooLarge

MAX_DEPTH = 64  # arrays and objects inside one another, the event's own object included
MAX_LINE_BYTES = 8 << 20  # room for the largest log line (1 Mi characters, each escaped) or plot (4 MiB)
_SLICE = 1 << 18
_NEWLINE, _QUOTE, _BACKSLASH = 0x0A, 0x22, 0x5C
_OPEN, _CLOSE = 0x7B, 0x7D  # '{' and '}'; '[' and ']' read the same once bit 0x20 is set
_BLANKS = b" \t\r"
_BLANK_MOST = 0x20  # no blank byte is above the space


@dataclass
class Lines:
    """The lines of a body that hold an event (blank lines hold none), as byte ranges without their surrounding
    blanks; ``refused`` lists the lines past a limit, as (line numbers, reason, detail). ``first`` and ``last`` are
    the first and last byte of each line, where the scan kept them; ``longest`` is the length of the longest.
    ``ascii`` and ``backslash`` say whether every byte of the body is ASCII and whether one is a backslash, where the
    scan saw it (without it: not known to be ASCII, and maybe a backslash)."""

    starts: np.ndarray
    ends: np.ndarray
    refused: list[tuple[np.ndarray, str, str]] = field(default_factory=list)
    first: np.ndarray | None = None
    last: np.ndarray | None = None
    longest: int = -1
    ascii: bool = False
    backslash: bool = True

    def __post_init__(self) -> None:
        if self.longest < 0:
            self.longest = int((self.ends - self.starts).max()) if len(self) else 0

    def __len__(self) -> int:
        return len(self.starts)

    def objects(self, data: bytes) -> bool:
        """Whether every line starts with '{' and ends with '}', and none was refused (``data``, the body, is read
        only where the scan did not keep the lines' first and last bytes)."""
        if self.refused or not len(self):
            return False
        if self.first is None or self.last is None:
            text = np.frombuffer(data, np.uint8)
            self.first, self.last = text[self.starts], text[self.ends - 1]
        return bool((self.first == _OPEN).all() and (self.last == _CLOSE).all())


def scan_lines(data: bytes, max_events: int) -> Lines:
    """The lines of ``data``; raises PayloadTooLarge past ``max_events`` lines and BadRequest where there are none."""
    text = np.frombuffer(data, np.uint8)
    found: list[tuple[np.ndarray, ...]] = []  # (starts, ends, first bytes, last bytes) of the lines of each slice
    line_start, count, opening, all_ascii, backslash = 0, 0, 0, True, False
    buffers = np.empty(min(_SLICE, len(text)), np.uint8), np.empty(min(_SLICE, len(text)), bool)
    for at in range(0, len(text), _SLICE):
        part = text[at : at + _SLICE]
        opened, breaks = _read_slice(part, *buffers)
        # what the reader asks of the body, seen while the slice is in the cache
        opening, all_ascii = opening + opened, all_ascii and int(part.max()) < 0x80
        backslash = backslash or data.find(b"\\", at, at + len(part)) >= 0
        if not len(breaks):
            continue
        breaks += at
        found.append(_trimmed(data, text, np.concatenate(([line_start], breaks[:-1] + 1)), breaks))
        count += len(found[-1][0])
        if count > max_events:
            raise PayloadTooLarge(f"a batch holds at most {max_events} events", field="body")
        line_start = int(breaks[-1]) + 1
    found.append(_trimmed(data, text, np.array([line_start]), np.array([len(text)])))
    longest = max(int((ends - starts).max(initial=0)) for starts, ends, _, _ in found)
    starts, ends, first, last = (np.concatenate(column) for column in zip(*found, strict=True))
    ranges = starts.astype(np.int64, copy=False), ends.astype(np.int64, copy=False)
    lines = Lines(*ranges, [], first, last, longest, all_ascii, backslash)
    if not len(lines):
        raise BadRequest("body holds no events", field="body")
    if len(lines) > max_events:
        raise PayloadTooLarge(f"a batch holds at most {max_events} events", field="body")
    _refuse_long_and_deep(data, text, lines, opening)
    return lines


def _read_slice(part: np.ndarray, folded: np.ndarray, hits: np.ndarray) -> tuple[int, np.ndarray]:
    """How many '{' and '[' ``part`` holds, and where its line breaks are; ``folded`` and ``hits`` are room for what
    is worked out on the way (at least as long as ``part``), so that no slice needs memory of its own."""
    size = len(part)
    np.bitwise_or(part, 0x20, out=folded[:size])
    opened = int(np.count_nonzero(np.equal(folded[:size], _OPEN, out=hits[:size])))
    return opened, np.flatnonzero(np.equal(part, _NEWLINE, out=hits[:size]))


def _trimmed(data: bytes, text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, ...]:
    """The ranges (each from the start of a line, after a line break or at 0, to its end, at a line break or the end
    of ``text``) without their leading and trailing blanks, the blank ones left out, and their first and last
    bytes."""
    first, last = _edges(text, starts, ends)
    if len(first) and min(first.min(), last.min()) > _BLANK_MOST:
        # no range starts or ends with a blank, and none is empty (the byte at an empty one is a line break)
        return starts, ends, first, last
    for _ in range(4):  # a carriage return, a space or two: a few steps of every line at once
        filled = starts < ends
        lead, trail = filled & _is_blank(first), filled & _is_blank(last)
        if not lead.any() and not trail.any():
            break
        starts = starts + lead
        ends = ends - (trail & (starts < ends))
        first, last = _edges(text, starts, ends)
    else:  # longer runs of blanks, line by line (among those the last step trimmed)
        starts, ends = starts.copy(), ends.copy()
        for i in np.flatnonzero(lead | trail).tolist():
            line = data[starts[i] : ends[i]]
            starts[i] += len(line) - len(line.lstrip(_BLANKS))
            ends[i] -= len(line) - len(line.rstrip(_BLANKS)) if starts[i] < ends[i] else 0
        first, last = _edges(text, starts, ends)
    kept = starts < ends
    return starts[kept], ends[kept], first[kept], last[kept]


def _edges(text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and last byte of each range (of an empty one, some byte: the caller leaves it out)."""
    if not len(text):
        return np.zeros(len(starts), dtype=np.uint8), np.zeros(len(starts), dtype=np.uint8)
    return text[np.minimum(starts, len(text) - 1)], text[np.maximum(ends - 1, 0)]


def _is_blank(values: np.ndarray) -> np.ndarray:
    return (values == 0x20) | (values == 0x09) | (values == 0x0D)


def _refuse_long_and_deep(data: bytes, text: np.ndarray, lines: Lines, opening: int) -> None:
    """Refuse the lines past ``MAX_LINE_BYTES``, and those nested deeper than ``MAX_DEPTH``; ``opening`` is how many
    '{' and '[' the body holds."""
    long = None
    if lines.longest > MAX_LINE_BYTES:
        long = (lines.ends - lines.starts) > MAX_LINE_BYTES
        lines.refused.append((np.flatnonzero(long), "line_too_long", f"a line is at most {MAX_LINE_BYTES} bytes"))
    starting = int(np.count_nonzero((lines.first | 0x20) == _OPEN))
    if opening - starting + 1 <= MAX_DEPTH:
        return  # no line holds more '{' and '[' than the limit, so none is nested deeper
    many = _openings(text, lines.starts, lines.ends) > MAX_DEPTH
    maybe = np.flatnonzero(many if long is None else many & ~long)  # a long line is not read at all
    if not len(maybe):
        return
    depths = nesting(data, lines.starts[maybe], lines.ends[maybe])
    deep = maybe[depths > MAX_DEPTH]
    if len(deep):
        detail = f"an event is nested at most {MAX_DEPTH} arrays or objects deep"
        lines.refused.append((deep, "too_deep", detail))


def _openings(text: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """How many '{' and '[' each range holds (in strings or not), read a slice at a time: the count of those before
    each start and each end, which are in order."""
    before = [np.zeros(len(starts), dtype=np.int64), np.zeros(len(ends), dtype=np.int64)]
    seen = 0
    for at in range(0, len(text), _SLICE):
        part = text[at : at + _SLICE]
        found = np.flatnonzero((part | 0x20) == _OPEN) + at
        for points, counts in zip((starts, ends), before, strict=True):
            low, high = np.searchsorted(points, (at, at + len(part)))  # the points in this slice
            counts[low:high] = seen + np.searchsorted(found, points[low:high])
        seen += len(found)
    before[1][np.searchsorted(ends, len(text)) :] = seen  # a line that ends the body has every one before its end
    return before[1] - before[0]


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
