"""Arguments to probe a tool with: values that fit its parameters, documented examples first.

For each parameter the candidates are, in order: what the schema documents (``examples``,
``example``, ``default``, ``const``, every ``enum`` value), values the description quotes as
examples ("e.g. 'Europe/London'", "such as \\"docs\\""), and a plain value of its type and format
(a date for ``format: date``, ``UTC`` for a time zone, a file name for a path, statements for
a parameter that takes SQL: :func:`sql_statements`), then strings the source itself answered
before (see :func:`probe_arguments`). A probe takes
the i-th candidate of every parameter: the required ones first, then all. Every probe is checked
against the schema with jsonschema; one that does not fit is dropped.
"""

from __future__ import annotations

import json
import re
from typing import Any, Iterator

from jsonschema import validators
from jsonschema.exceptions import SchemaError

_QUOTED_EXAMPLE = re.compile(r"(?:e\.g\.?,?|for example,?|such as|like|example:|examples?:)\s*((?:['\"`][^'\"`]{1,80}['\"`][,\s]*(?:or|and)?\s*)+)",
                             re.IGNORECASE)
_QUOTE = re.compile(r"['\"`]([^'\"`]{1,80})['\"`]")
_FORMATS = {"date": "2026-01-15", "date-time": "2026-01-15T09:30:00Z", "time": "09:30:00", "email": "user@example.com",
            "uri": "https://example.com", "url": "https://example.com", "hostname": "example.com", "ipv4": "127.0.0.1",
            "uuid": "123e4567-e89b-12d3-a456-426614174000"}
# A parameter's name, as a hint of what a plain value should look like (checked against the
# schema like any candidate).
_NAMED = (
    (re.compile(r"time_?zone|\btz\b", re.I), "UTC"),
    (re.compile(r"date", re.I), "2026-01-15"),
    (re.compile(r"time", re.I), "09:30"),
    (re.compile(r"e-?mail", re.I), "user@example.com"),
    (re.compile(r"url|uri|link", re.I), "https://example.com"),
    # A repository's path: the server's own working folder (where a session's repository is).
    (re.compile(r"repo", re.I), "."),
    (re.compile(r"dir|folder", re.I), "docs"),
    (re.compile(r"path|file", re.I), "notes.txt"),
    (re.compile(r"lang", re.I), "en"),
    (re.compile(r"currency", re.I), "USD"),
    (re.compile(r"country", re.I), "US"),
    (re.compile(r"city|location|place", re.I), "London"),
    (re.compile(r"(^|_)id$|_id\b", re.I), "1"),
    (re.compile(r"query|search|keyword|text|content|message", re.I), "hello"),
)


# A parameter that takes SQL: its name or its description says so ("SQL query to execute").
_SQL = re.compile(r"\bSQL\b", re.IGNORECASE)
# The kinds of statement a description names, written as SQL writes them.
_SQL_KINDS = ("SELECT", "INSERT", "UPDATE", "DELETE", "CREATE TABLE")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
NEW_TABLE = "probe_notes"  # the table a probe of a CREATE TABLE tool makes


def takes_sql(name: str, schema: dict[str, Any]) -> bool:
    """Whether a string parameter takes SQL, by its name or its description."""
    return bool(_SQL.search(name.replace("_", " ")) or _SQL.search(str(schema.get("description") or "")))


def sql_statements(described: str, found: tuple[str, ...]) -> list[str]:
    """Statements that can run on any SQL database, of the kinds `described` names (a SELECT
    when it names none): on each table among the names the source answered (`found`: a
    listing's table names), rows inserted with their defaults, deleted or read; then a table
    made, and a constant read. A write that can succeed is what tells a write tool from a read
    one; a name that is no table only costs a refused probe."""
    kinds = [kind for kind in _SQL_KINDS if re.search(rf"\b{kind}\b", described)] or ["SELECT"]
    out: list[str] = []
    for table in (name for name in found if _IDENTIFIER.match(name)):
        out += [statement for kind, statement in (("INSERT", f"INSERT INTO {table} DEFAULT VALUES"),
                                                  ("DELETE", f"DELETE FROM {table}"),
                                                  ("SELECT", f"SELECT * FROM {table} LIMIT 5")) if kind in kinds]
    if "CREATE TABLE" in kinds:
        out.append(f"CREATE TABLE {NEW_TABLE} (id INTEGER PRIMARY KEY, note TEXT)")
    if "SELECT" in kinds:
        out.append("SELECT 1")
    return out


def documented(schema: dict[str, Any]) -> list[Any]:
    """The values a parameter's schema documents, in order."""
    found: list[Any] = []
    examples = schema.get("examples")
    if isinstance(examples, list):
        found += examples
    for key in ("example", "default", "const"):
        if key in schema:
            found.append(schema[key])
    if isinstance(schema.get("enum"), list):
        found += schema["enum"]
    for match in _QUOTED_EXAMPLE.finditer(str(schema.get("description") or "")):
        found += _QUOTE.findall(match[1])
    return found


def _type(schema: dict[str, Any]) -> str | None:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind is None:
        for key in ("anyOf", "oneOf"):
            options = [o for o in schema.get(key) or [] if isinstance(o, dict) and o.get("type") != "null"]
            if options:
                return _type(options[0])
        if "properties" in schema:
            return "object"
    return kind if isinstance(kind, str) else None


def plain(name: str, schema: dict[str, Any], described: str = "", found: tuple[str, ...] = ()) -> list[Any]:
    """Plain values of the parameter's type (and format, and name)."""
    kind = _type(schema)
    if kind == "string":
        values: list[Any] = [_FORMATS[schema["format"]]] if schema.get("format") in _FORMATS else []
        if takes_sql(name, schema):
            values += sql_statements(f"{described}\n{schema.get('description') or ''}", found)
        values += [value for pattern, value in _NAMED if pattern.search(name)]
        return [*values, "example"]
    if kind in ("integer", "number"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value = max(1, int(low) + 1) if isinstance(low, (int, float)) else 1
        return [value if kind == "integer" else float(value), 2 if kind == "integer" else 2.5]
    if kind == "boolean":
        return [True, False]
    if kind == "array":
        items = schema.get("items") if isinstance(schema.get("items"), dict) else {}
        inner = candidates(name, items)[:1] if items else ["example"]
        return [inner * max(1, int(schema.get("minItems") or 1))]
    if kind == "object":
        return [instance(schema, 0, required_only=True)]
    return ["example"]


def candidates(name: str, schema: dict[str, Any], found: tuple[str, ...] = (), described: str = "") -> list[Any]:
    """A parameter's candidate values without repeats: documented first, then a value of its
    format, language or name, then values the source itself answered (`found`, for a string),
    then a plain value of its type. `described`: the function's description."""
    out: list[Any] = []
    seen: set[str] = set()
    answered = list(found) if _type(schema) == "string" and not schema.get("enum") else []
    typed = plain(name, schema, described, found)
    # documented, then a value of its format or name, then what the source answered, then any
    for value in [*documented(schema), *typed[:-1], *answered, *typed[-1:]]:
        key = json.dumps(value, sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            out.append(value)
    return out


def instance(schema: dict[str, Any], index: int, required_only: bool, found: tuple[str, ...] = (),
             described: str = "") -> dict[str, Any]:
    """An object for `schema`: the `index`-th candidate of each property (the last where fewer)."""
    listed = schema.get("properties")
    properties: dict[str, Any] = listed if isinstance(listed, dict) else {}
    required = [name for name in schema.get("required") or [] if name in properties]
    chosen = required if required_only else list(properties)
    out: dict[str, Any] = {}
    for name in chosen:
        values = candidates(name, properties[name] if isinstance(properties[name], dict) else {}, found, described)
        if values:
            out[name] = values[min(index, len(values) - 1)]
    return out


def probe_arguments(schema: dict[str, Any], limit: int = 3, found: tuple[str, ...] = (),
                    described: str = "") -> list[dict[str, Any]]:
    """Up to `limit` distinct argument objects that fit `schema` (see the module doc); `found`:
    strings the source answered before (names of things that exist there), tried after the
    documented values; `described`: the function's description (the kinds of SQL statement it
    runs)."""
    try:
        validator_class = validators.validator_for(schema)
        validator_class.check_schema(schema)
        validator = validator_class(schema)
    except SchemaError:
        validator = None
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for arguments in _drafts(schema, limit, found, described):
        key = json.dumps(arguments, sort_keys=True, default=str)
        if key in seen or (validator is not None and not validator.is_valid(arguments)):
            continue
        seen.add(key)
        out.append(arguments)
        if len(out) == limit:
            break
    return out


def _drafts(schema: dict[str, Any], limit: int, found: tuple[str, ...], described: str) -> Iterator[dict[str, Any]]:
    for index in range(limit + 3 * len(found) + 5):
        yield instance(schema, index, required_only=True, found=found, described=described)
        yield instance(schema, index, required_only=False, found=found, described=described)


def strings_in(value: Any, limit: int = 8) -> list[str]:
    """Short strings an answer or a state holds (values, and the keys of objects whose values are
    objects: a folder's entries), most specific first, for :func:`probe_arguments`' `found`."""
    out: list[str] = []

    def walk(item: Any) -> None:
        if isinstance(item, dict):
            for key, inner in item.items():
                if isinstance(inner, dict) and isinstance(key, str) and 0 < len(key) <= 64:
                    out.append(key)
                walk(inner)
        elif isinstance(item, list):
            for inner in item:
                walk(inner)
        elif isinstance(item, str) and 0 < len(item) <= 64 and "\n" not in item:
            out.append(item)

    walk(value)
    return list(dict.fromkeys(reversed(out)))[:limit]
