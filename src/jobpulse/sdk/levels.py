"""The level of a console line, read from its text and the stream it came on.

One rule for the SDK's console capture and for ``jobpulse run``'s capture of a command's output:

1. A line that states its level has it. Recognised, at the start of the line (after a timestamp, a
   process or thread id, or a logger name in brackets):

   - Python ``logging``'s default format: ``WARNING:root:...``, ``ERROR:train:...``;
   - a level word, in capitals, as one of the leading fields: ``ERROR ...``, ``[WARNING] ...``,
     ``2024-05-01 12:00:00,123 - train - WARNING - ...``, ``12:00:00 | ERROR | ...``, ``<INFO> ...``;
     ``WARN``, ``ERR``, ``FATAL``, ``CRIT``, ``TRACE`` and ``NOTICE`` count as their nearest level;
   - the word capitalised and followed by a colon: ``Warning: ...``, ``Error: ...``, ``Fatal: ...``;
   - glog / absl (``W0501 12:00:00.123456 123 file.cc:12] ...``) and tornado-style (``[W 240501 ...]``)
     one-letter prefixes, and NCCL's ``host:pid:tid [0] NCCL WARN ...``;
   - a warning printed by Python's ``warnings`` (``file.py:12: UserWarning: ...``);
   - the first line of a Python traceback (``Traceback (most recent call last):``).
2. A Python traceback is ``error`` to its end: its indented lines and the exception line that closes it.
   An indented line right after a line of level warning or above keeps that level (the source line that
   ``warnings`` prints, a record's stack).
3. Any other line is ``info`` on standard output. On standard error it is ``warning``: that stream is
   for diagnostics, so a line there that does not say otherwise is shown as one, and a filter on
   warnings finds it — except a progress bar (``45%|####  | 450/1000 [...]``), which is ``info``
   wherever it is drawn (tqdm draws on standard error).
"""

from __future__ import annotations

import re

STDOUT, STDERR = "stdout", "stderr"
_RANK = {"debug": 0, "info": 1, "warning": 2, "error": 3, "critical": 4}
_WORDS = {
    "TRACE": "debug",
    "DEBUG": "debug",
    "INFO": "info",
    "NOTICE": "info",
    "WARN": "warning",
    "WARNING": "warning",
    "ERR": "error",
    "ERROR": "error",
    "CRIT": "critical",
    "CRITICAL": "critical",
    "FATAL": "critical",
}
_LETTERS = {"D": "debug", "I": "info", "W": "warning", "E": "error", "C": "critical", "F": "critical"}
_TITLE = {"Debug": "debug", "Info": "info", "Warning": "warning", "Error": "error", "Fatal": "critical"}

_LOGGING = re.compile(r"(DEBUG|INFO|WARNING|ERROR|CRITICAL):[^\s:]*:")
_STAMP = re.compile(
    r"(?:\d{4}-\d\d-\d\d|\d\d/\d\d/\d{2,4})?[ T]?(?:\d\d:\d\d:\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?(?=[\s\]|,-]|$)"
)
_WORD = re.compile(r"[\[<(]?(?P<word>" + "|".join(_WORDS) + r")[\]>)]?(?=$|[\s:|\]-])")
_BRACKETED = re.compile(r"\[[^\]]{0,80}\]|\([^)]{0,80}\)|<[^>]{0,80}>")
_NAMED = re.compile(r"[^\s\[\]()|]{1,80}(?= - | \| |: )")  # a name set off by a separator
_BARE = re.compile(r"[^\s\[\]()|]{1,80}(?=\s)")  # a name set off by a space only (after a time stamp)
_SEPARATORS = " \t-|:,"
_TITLED = re.compile(r"(?P<word>Debug|Info|Warning|Error|Fatal)(?: error)?:\s")
_GLOG = re.compile(r"(?P<letter>[DIWEF])\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]+\]")
_NCCL = re.compile(r"(?:\S+\s+)?(?:\[\d+\]\s+)?NCCL (?P<word>INFO|WARN|ERROR|TRACE)\b")
_BRACKET_LETTER = re.compile(r"\[(?P<letter>[DIWECF]) \d{6} \d\d:\d\d:\d\d")
_PY_WARNING = re.compile(r"\S.*:\d+: [A-Za-z_]*Warning: ")
_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = (
    "During handling of the above exception, another exception occurred:",
    "The above exception was the direct cause of the following exception:",
)
_PROGRESS = re.compile(r"\d{1,3}%\|.*\||\|\s*\d+/\d+\s*\[\d+:\d\d")


def _leading_word(text: str) -> str | None:
    """The level word among the leading fields of ``text``: after a time stamp and up to three names (in
    brackets, or set off by `` - ``, `` | `` or ``: ``; after a time stamp, by a space too)."""
    stamp = _STAMP.match(text)
    stamped = stamp is not None and stamp.end() > 0
    rest = text[stamp.end() :] if stamp is not None else text
    for _ in range(4):
        rest = rest.lstrip(_SEPARATORS)
        word = _WORD.match(rest)
        if word:
            return _WORDS[word.group("word")]
        name = _BRACKETED.match(rest) or _NAMED.match(rest) or (_BARE.match(rest) if stamped else None)
        if name is None:
            return None
        rest = rest[name.end() :]
    return None


def stated_level(line: str) -> str | None:
    """The level ``line`` states (see the module doc, rule 1), or None."""
    text = line.lstrip()
    if not text:
        return None
    match = _LOGGING.match(text)
    if match:
        return _WORDS[match.group(1)]
    if text.startswith(_TRACEBACK) or text.startswith(_CHAINED):
        return "error"
    match = _GLOG.match(text) or _BRACKET_LETTER.match(text)
    if match:
        return _LETTERS[match.group("letter")]
    match = _TITLED.match(text)
    if match:
        return _TITLE[match.group("word")]
    match = _NCCL.match(text)
    if match:
        return _WORDS[match.group("word")]
    level = _leading_word(text[:200])
    if level is not None:
        return level
    if _PY_WARNING.match(text):
        return "warning"
    return None


def is_progress(line: str) -> bool:
    """Whether ``line`` is the final state of a progress bar."""
    return bool(_PROGRESS.search(line))


class LineLevels:
    """The levels of the lines of one stream, in the order they were written (rules 1-3 of the module doc)."""

    def __init__(self, stream: str) -> None:
        if stream not in (STDOUT, STDERR):
            raise ValueError(f"stream must be {STDOUT!r} or {STDERR!r}, got {stream!r}")
        self.stream = stream
        self._traceback = False
        self._carried: str | None = None  # the level an indented next line keeps

    def __call__(self, line: str) -> str:
        """The level of the next ``line`` of the stream."""
        if self._traceback:
            if line[:1] in (" ", "\t") or not line.strip():
                return "error"
            self._traceback = False  # the exception line, which ends it
            self._carried = "error"
            return "error"
        stated = stated_level(line)
        continued = line[:1] in (" ", "\t") or not line.strip()
        if stated is None and self._carried is not None and continued and not is_progress(line):
            return self._carried
        self._traceback = line.lstrip().startswith(_TRACEBACK)
        level = stated or self._default(line)
        self._carried = level if _RANK[level] >= _RANK["warning"] else None
        return level

    def _default(self, line: str) -> str:
        if self.stream == STDOUT or is_progress(line):
            return "info"
        return "warning"
