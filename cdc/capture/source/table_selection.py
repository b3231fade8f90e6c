"""Which tables ``source.tables`` selects: exact names, glob patterns and exclusions.

An entry is ``schema.table``; each part is either a glob (``*`` any characters, ``?`` one
character, ``[abc]``/``[!abc]`` a character class) or, in double quotes, an exact name
that may hold any character (``"Sales Data"."order.2024*"``; ``""`` is one ``"``). Names
match the catalog case-sensitively, as PostgreSQL stores them. An entry starting with
``!`` excludes what it matches. A table is selected when an inclusion matches it (or no
inclusion is listed) and no exclusion does. Glob patterns skip partitions — a
partitioned table is captured through its root — while an exact name selects the table
it names, whatever it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_PART = re.compile(r'"((?:[^"]|"")+)"|([^".]+)')
_GLOB_CHARS = frozenset("*?[")
_PLAIN = re.compile(r'[^\s"]+')
SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema"})


class PatternError(ValueError):
    """A ``source.tables`` entry that cannot be read; the message says why and the fix."""


@dataclass(frozen=True, slots=True)
class NamePart:
    """One side of ``schema.table``: an exact name, or a glob compiled to a regex."""

    text: str  # the name (exact) or the glob as written
    regex: re.Pattern[str] | None  # None: an exact name

    def matches(self, name: str) -> bool:
        return name == self.text if self.regex is None else bool(self.regex.fullmatch(name))

    @property
    def is_everything(self) -> bool:
        return self.regex is not None and set(self.text) == {"*"}


@dataclass(frozen=True, slots=True)
class TablePattern:
    """One parsed entry of ``source.tables``."""

    written: str
    schema: NamePart
    table: NamePart
    exclude: bool

    @property
    def exact(self) -> tuple[str, str] | None:
        """``(schema, table)`` when the entry names one table."""
        if self.schema.regex is None and self.table.regex is None:
            return (self.schema.text, self.table.text)
        return None

    @property
    def whole_schema(self) -> str | None:
        """The schema this entry selects entirely (``public.*``), if it does."""
        if self.schema.regex is None and self.table.is_everything and not self.exclude:
            return self.schema.text
        return None

    def matches(self, schema: str, table: str) -> bool:
        return self.schema.matches(schema) and self.table.matches(table)


def _glob_regex(glob: str, entry: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(glob):
        char = glob[i]
        if char == "*":
            out.append(".*")
        elif char == "?":
            out.append(".")
        elif char == "[":
            end = glob.find("]", i + 2 if glob[i + 1:i + 2] in ("!", "]") else i + 1)
            if end < 0:
                raise PatternError(f"{entry!r}: '[' opens a character class that is never "
                                   "closed; close it with ']' or quote the name")
            body = glob[i + 1:end]
            body = body.replace("\\", "\\\\")
            body = "^" + body[1:] if body.startswith("!") else body.replace("^", "\\^", 1)
            out.append("[" + body + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    try:
        return re.compile("".join(out), re.S)
    except re.error as exc:  # e.g. a reversed range: [z-a]
        raise PatternError(f"{entry!r}: {glob!r} is not a valid glob ({exc}); fix the "
                           "character class or quote the name") from None


def _part(text: str, quoted: bool, entry: str) -> NamePart:
    if quoted:
        return NamePart(text.replace('""', '"'), None)
    if not _PLAIN.fullmatch(text):
        raise PatternError(f"{entry!r}: {text!r} holds characters a bare name may not; "
                           f"write it in double quotes, like '\"{text}\"'")
    if _GLOB_CHARS & set(text):
        return NamePart(text, _glob_regex(text, entry))
    return NamePart(text, None)


def parse_pattern(entry: str) -> TablePattern:
    """Read one entry of ``source.tables``; ``PatternError`` says what is wrong."""
    exclude = entry.startswith("!")
    body = entry[1:] if exclude else entry
    parts: list[NamePart] = []
    position = 0
    while True:
        match = _PART.match(body, position)
        if match is None:
            raise PatternError(f"{entry!r}: expected 'schema.table' (a glob like 'public.*' "
                               "or a quoted name like '\"My Schema\".\"Orders\"')")
        quoted = match.group(1) is not None
        parts.append(_part(match.group(1) if quoted else match.group(2), quoted, entry))
        position = match.end()
        if position == len(body):
            break
        if body[position] != ".":
            raise PatternError(f"{entry!r}: unexpected {body[position]!r} after a quoted "
                               "name; expected '.' between schema and table")
        position += 1
    if len(parts) != 2:
        raise PatternError(f"{entry!r}: expected exactly one '.' between schema and table "
                           f"(found {len(parts)} parts); quote a name that holds a dot, "
                           "like 'public.\"a.b\"'")
    return TablePattern(entry, parts[0], parts[1], exclude)


@dataclass(frozen=True, slots=True)
class TableSelection:
    """The parsed ``source.tables``: which catalog tables it selects."""

    patterns: tuple[TablePattern, ...]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> TableSelection:
        """Parse every entry (the first bad one raises ``PatternError``)."""
        return cls(tuple(parse_pattern(entry) for entry in entries))

    @property
    def everything(self) -> bool:
        """No entry at all: every table (a publication FOR ALL TABLES)."""
        return not self.patterns

    @property
    def includes(self) -> tuple[TablePattern, ...]:
        return tuple(p for p in self.patterns if not p.exclude)

    @property
    def excludes(self) -> tuple[TablePattern, ...]:
        return tuple(p for p in self.patterns if p.exclude)

    @property
    def exact_only(self) -> bool:
        """Every entry names one table: the selection needs no catalog."""
        return bool(self.patterns) and all(p.exact and not p.exclude for p in self.patterns)

    def selects(self, schema: str, table: str, *, partition: bool = False) -> bool:
        """Whether ``schema.table`` is selected (``partition``: a partition of another)."""
        if schema in SYSTEM_SCHEMAS or schema.startswith("pg_toast"):
            return False
        if any(p.matches(schema, table) for p in self.excludes):
            return False
        includes = self.includes
        if not includes:
            return not partition
        return any(p.matches(schema, table) and (not partition or p.exact is not None)
                   for p in includes)

    def whole_schemas(self) -> tuple[str, ...]:
        """Schemas selected entirely (``schema.*``) that no exclusion touches: a publication
        may take them ``FOR TABLES IN SCHEMA`` (PostgreSQL 15+)."""
        return tuple(sorted({s for p in self.includes if (s := p.whole_schema) is not None
                             and not any(x.schema.matches(s) for x in self.excludes)}))

    def resolve(self, catalog: Iterable[tuple[str, str, bool]]) -> list[tuple[str, str]]:
        """The selected ``(schema, table)`` of ``catalog`` rows ``(schema, table,
        is_partition)``, sorted."""
        return sorted((schema, table) for schema, table, partition in catalog
                      if self.selects(schema, table, partition=partition))

    def unmatched(self, catalog: Iterable[tuple[str, str, bool]]) -> list[str]:
        """Inclusions that select no table of ``catalog`` (likely a typo)."""
        rows = list(catalog)
        return [p.written for p in self.includes
                if not any(p.matches(s, t) and (not part or p.exact is not None)
                           for s, t, part in rows)]


def quote_name(schema: str, table: str) -> str:
    """How to write one table as a ``source.tables`` entry (quoted only when needed)."""
    def part(name: str) -> str:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", name):
            return name
        return '"' + name.replace('"', '""') + '"'
    return f"{part(schema)}.{part(table)}"
