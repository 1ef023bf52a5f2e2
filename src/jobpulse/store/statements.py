"""Migration statements read into their parts: the shapes of ``schema.MIGRATIONS`` that the cluster form
(``cluster_schema.py``) rewrites and that a migrator finishes when a step was interrupted (``migrations.py``).

The statements are ours, so this is a small reader of our own shapes, not a SQL parser: a statement of another
shape is ``UnknownStatement``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FLAGS = re.S | re.I
TABLE_NAME = r"(\w+)\.(\w+)"
_PATTERNS = {
    "create_database": re.compile(r"CREATE\s+DATABASE\s+(IF\s+NOT\s+EXISTS\s+)?(\w+)\s*", FLAGS),
    "create_view": re.compile(
        rf"CREATE\s+MATERIALIZED\s+VIEW\s+(IF\s+NOT\s+EXISTS\s+)?{TABLE_NAME}\s+TO\s+{TABLE_NAME}\s+AS\s+(SELECT\b.*)",
        FLAGS,
    ),
    "create_table": re.compile(rf"CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?{TABLE_NAME}\s*(\(.*)", FLAGS),
    "create_copy": re.compile(
        rf"CREATE\s+TABLE\s+(IF\s+NOT\s+EXISTS\s+)?{TABLE_NAME}\s+AS\s+{TABLE_NAME}\s*(ENGINE\b.*)?", FLAGS
    ),
    "insert_select": re.compile(rf"INSERT\s+INTO\s+{TABLE_NAME}\s+(SELECT\b.*)", FLAGS),
    "alter": re.compile(rf"ALTER\s+TABLE\s+{TABLE_NAME}\s+(.+)", FLAGS),
    "drop": re.compile(rf"DROP\s+(TABLE|VIEW)\s+(IF\s+EXISTS\s+)?{TABLE_NAME}\s*", FLAGS),
    "rename": re.compile(r"RENAME\s+TABLE\s+(.+)", FLAGS),
    "truncate": re.compile(rf"TRUNCATE\s+TABLE\s+(IF\s+EXISTS\s+)?{TABLE_NAME}\s*", FLAGS),
    "delete": re.compile(rf"DELETE\s+FROM\s+{TABLE_NAME}\s+WHERE\s+(.+)", FLAGS),
}
_PAIR = re.compile(rf"\s*{TABLE_NAME}\s+TO\s+{TABLE_NAME}\s*", FLAGS)
ENGINE_CLAUSE = re.compile(r"ENGINE\s*=\s*(\w+)\s*(.*)", FLAGS)
ALTER_COMMAND = re.compile(
    r"(MODIFY|ADD|DROP)\s+COLUMN\s+(IF\s+(?:NOT\s+)?EXISTS\s+)?(\w+)|MODIFY\s+TTL|REMOVE\s+TTL|MODIFY\s+SETTING\b",
    FLAGS,
)
_COLUMN_KEYWORDS = {"INDEX", "PROJECTION", "CONSTRAINT"}


class UnknownStatement(ValueError):
    """A statement of a shape this reader does not know, so that no cluster form or resumption is made of it."""


@dataclass(frozen=True)
class Statement:
    """One migration statement, read into its parts; table names are without their database."""

    kind: str  # a key of _PATTERNS; "drop" covers tables and views
    db: str
    table: str = ""  # what it creates, fills, alters, drops or truncates
    guarded: bool = False  # IF [NOT] EXISTS
    body: str = ""  # the column list, the SELECT, the ALTER's commands, or the DELETE's condition
    engine: str = ""  # "ENGINE = ..." of a CREATE TABLE, as written
    source: str = ""  # create_copy: the table copied; create_view: the table the view writes to
    view: bool = False  # drop: DROP VIEW
    pairs: tuple[tuple[str, str], ...] = ()  # rename: (from, to)


def parse_statement(text: str) -> Statement:
    """``text`` read into its parts; ``UnknownStatement`` if it is not one of the shapes migrations use."""
    text = text.strip()
    for kind, pattern in _PATTERNS.items():
        found = pattern.fullmatch(text)
        if found:
            return _READERS[kind](found)
    raise UnknownStatement(f"no cluster form for statement: {text[:200]}")


def _create_database(m: re.Match) -> Statement:
    return Statement("create_database", m.group(2), guarded=bool(m.group(1)))


def _create_view(m: re.Match) -> Statement:
    if m.group(2) != m.group(4):
        raise UnknownStatement(f"view {m.group(3)} writes to another database")
    return Statement("create_view", m.group(2), m.group(3), bool(m.group(1)), body=m.group(6), source=m.group(5))


def _create_table(m: re.Match) -> Statement:
    rest = m.group(4)
    end = closing_paren(rest, 0)
    engine = rest[end + 1 :].strip()
    if not ENGINE_CLAUSE.match(engine):
        raise UnknownStatement(f"table {m.group(3)}: no ENGINE after its columns")
    return Statement("create_table", m.group(2), m.group(3), bool(m.group(1)), body=rest[1:end], engine=engine)


def _create_copy(m: re.Match) -> Statement:
    engine = (m.group(6) or "").strip()
    return Statement("create_copy", m.group(2), m.group(3), bool(m.group(1)), engine=engine, source=m.group(5))


def _insert_select(m: re.Match) -> Statement:
    return Statement("insert_select", m.group(1), m.group(2), body=m.group(3))


def _alter(m: re.Match) -> Statement:
    commands = split_top_level(m.group(3))
    if not all(ALTER_COMMAND.match(c.strip()) for c in commands):
        raise UnknownStatement(f"ALTER of {m.group(2)}: a command other than ADD/MODIFY/DROP COLUMN, TTL or SETTING")
    return Statement("alter", m.group(1), m.group(2), body=m.group(3))


def _drop(m: re.Match) -> Statement:
    view = m.group(1).upper() == "VIEW"
    return Statement("drop", m.group(3), m.group(4), bool(m.group(2)), view=view)


def _rename(m: re.Match) -> Statement:
    pairs = []
    for part in split_top_level(m.group(1)):
        found = _PAIR.fullmatch(part)
        if not found:
            raise UnknownStatement(f"RENAME part not understood: {part.strip()[:100]}")
        pairs.append(found.groups())
    databases = {p[0] for p in pairs} | {p[2] for p in pairs}
    if len(databases) != 1:
        raise UnknownStatement("RENAME across databases")
    return Statement("rename", pairs[0][0], pairs=tuple((p[1], p[3]) for p in pairs))


def _truncate(m: re.Match) -> Statement:
    return Statement("truncate", m.group(2), m.group(3), bool(m.group(1)))


def _delete(m: re.Match) -> Statement:
    return Statement("delete", m.group(1), m.group(2), body=m.group(3))


_READERS = {
    "create_database": _create_database,
    "create_view": _create_view,
    "create_table": _create_table,
    "create_copy": _create_copy,
    "insert_select": _insert_select,
    "alter": _alter,
    "drop": _drop,
    "rename": _rename,
    "truncate": _truncate,
    "delete": _delete,
}


def closing_paren(text: str, start: int) -> int:
    """The index of the parenthesis that closes the one at ``start``, skipping quoted text."""
    depth, quote, i = 0, "", start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'`\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise UnknownStatement(f"unbalanced parentheses in: {text[:100]}")


def split_top_level(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses and quotes."""
    parts, depth, quote, begin = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote and text[i - 1] != "\\" else quote
        elif ch in "'`\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[begin:i])
            begin = i + 1
    parts.append(text[begin:])
    return parts


def column_names(columns: str) -> tuple[str, ...]:
    """The names of the columns a CREATE TABLE's column list declares (indexes and projections left out)."""
    names = []
    for item in split_top_level(columns):
        word = item.split(None, 1)[0] if item.strip() else ""
        if word and word.upper() not in _COLUMN_KEYWORDS:
            names.append(word.strip("`"))
    return tuple(names)


def is_idempotent(text: str) -> bool:
    """Whether running ``text`` twice does what running it once does: a CREATE ... IF NOT EXISTS, a DROP ... IF
    EXISTS, an ALTER that only modifies columns, TTL or settings or adds and drops them IF [NOT] EXISTS, a DELETE. A
    statement of an unknown shape is taken not to be."""
    try:
        statement = parse_statement(text)
    except UnknownStatement:
        return False
    if statement.kind in ("create_database", "create_table", "create_copy", "create_view", "drop", "truncate"):
        return statement.guarded or statement.kind == "truncate"
    if statement.kind == "alter":
        commands = [ALTER_COMMAND.match(c.strip()) for c in split_top_level(statement.body)]
        return all(not m.group(1) or m.group(1).upper() == "MODIFY" or m.group(2) for m in commands)
    return statement.kind == "delete"
