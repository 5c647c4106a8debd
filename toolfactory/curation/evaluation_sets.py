"""The evaluation sets a dataset is decontaminated against: their items (user requests and the
functions they name), read from where each lives.

``bfcl``        BFCL's test categories, from the installed ``bfcl-eval`` package
                (``bfcl_eval/data/BFCL_v4_*.json``: each entry's ``question`` turns and the names of
                its ``function`` list), read without importing the package; absent package: the
                set is skipped with its reason;
``toolbench``   ToolBench's test queries and ``toolalpaca`` ToolAlpaca's evaluation sets, from the
                index shipped in ``toolfactory/curation/benchmarks/`` (see its ``PROVENANCE.md``,
                made by ``benchmarks/contamination_index.py``);
any other name  a JSON or JSON-lines file the user names (``curate.decontaminate.files``), its
                question text at a given field or found under a common key.

An item is one test entry: its user turns (one for most, several for BFCL's multi-turn entries)
and the normalised names of the functions it offers or needs (ToolBench's relevant APIs,
ToolAlpaca's golden actions), which the ``tools`` test compares with a record's.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Iterable, Iterator, NamedTuple

from toolfactory.errors import ConfigError

BUILTIN = ("bfcl", "toolbench", "toolalpaca")
SHIPPED = Path(__file__).resolve().parent / "benchmarks"
BFCL_PACKAGE = "bfcl_eval"
BFCL_INSTALL = "pip install --no-deps bfcl-eval==2026.3.23"
# Keys a question is looked for under, in this order, when a file's field is not given: BFCL's,
# ToolBench's, ToolAlpaca's and the usual chat and instruction-tuning names.
AUTO_KEYS = ("question", "query", "instruction", "instructions", "prompt", "user", "request", "input", "text",
             "messages", "conversations")
_FUNCTION_KEYS = ("function", "functions", "tools", "api_list")
_ID_KEYS = ("id", "query_id", "question_id", "qid")
_USER_ROLES = ("user", "human")


class Item(NamedTuple):
    id: str
    turns: tuple[str, ...]
    functions: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)  # by identity: the index of a set read once is cached by it
class EvaluationSet:
    """One set's items, where they were read from, and why it was skipped if it was."""

    name: str
    items: tuple[Item, ...]
    source: str
    skipped: str | None = None


def function_name(name: str) -> str:
    """A function name as the ``tools`` test compares it: the last dotted part (BFCL's
    ``math.factorial``), lower case, letters and digits only (ToolBench's ``Get Projects``)."""
    return re.sub(r"[^0-9a-z]", "", name.rsplit(".", 1)[-1].casefold())


def record_function_names(names: Iterable[str]) -> frozenset[str]:
    """The names a record offers, also without ToolBench's ``_for_<tool>`` suffix."""
    out: set[str] = set()
    for name in names:
        out.add(function_name(name))
        if "_for_" in name:
            out.add(function_name(name.split("_for_", 1)[0]))
    out.discard("")
    return frozenset(out)


# --- BFCL --------------------------------------------------------------------------------


def bfcl_folder() -> Path | None:
    spec = importlib.util.find_spec(BFCL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "data"


def bfcl_set() -> EvaluationSet:
    folder = bfcl_folder()
    if folder is None:
        return EvaluationSet("bfcl", (), "bfcl-eval", skipped=f"bfcl-eval is not installed ({BFCL_INSTALL})")
    files = sorted(folder.glob("BFCL_v4_*.json"))
    if not files:
        return EvaluationSet("bfcl", (), str(folder), skipped=f"no BFCL_v4_*.json in {folder}")
    items: list[Item] = []
    for path in files:
        for entry in _bfcl_entries(path):
            if isinstance(entry, dict) and (turns := tuple(user_turns(entry.get("question")))):
                items.append(Item(str(entry.get("id", len(items))), turns, _functions(entry.get("function"))))
    try:
        version = metadata.version("bfcl-eval")
    except metadata.PackageNotFoundError:
        version = "unknown version"
    return EvaluationSet("bfcl", tuple(items), f"bfcl-eval {version}: {len(files)} BFCL_v4 files")


def _bfcl_entries(path: Path) -> list[Any]:
    """A category's entries, one JSON line each; format_sensitivity is one JSON object listing ids
    of other categories' entries, not questions: it yields none."""
    text = path.read_text(encoding="utf-8")
    try:
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    except json.JSONDecodeError:
        data = json.loads(text)
        return data if isinstance(data, list) else []


# --- the shipped index --------------------------------------------------------------------


def shipped_set(name: str) -> EvaluationSet:
    """A set of the shipped index: one JSON line per item, ``{"id", "turns", "functions"}``."""
    path = SHIPPED / f"{name}.jsonl.gz"
    if not path.is_file():
        return EvaluationSet(name, (), str(path), skipped=f"the shipped index has no {path.name}")
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        rows = [json.loads(line) for line in lines if line.strip()]
    items = tuple(Item(row["id"], tuple(row["turns"]), tuple(row.get("functions", ()))) for row in rows)
    return EvaluationSet(name, items, f"toolfactory/curation/benchmarks/{path.name}")


def builtin_set(name: str) -> EvaluationSet:
    return bfcl_set() if name == "bfcl" else shipped_set(name)


def missing_set(name: str) -> str | None:
    """Why a built-in set would be skipped, found without reading it; None when it is there."""
    if name == "bfcl":
        return None if bfcl_folder() is not None else f"bfcl-eval is not installed ({BFCL_INSTALL})"
    return None if (SHIPPED / f"{name}.jsonl.gz").is_file() else f"the shipped index has no {name}.jsonl.gz"


# --- files the user names -----------------------------------------------------------------


def user_turns(value: Any) -> Iterator[str]:
    """The user text in a question value: a string; a list of them; chat messages (``role`` /
    ``content``, or ShareGPT's ``from`` / ``value``: the user's only); lists of those (BFCL's
    turns), flattened."""
    if isinstance(value, str):
        if value.strip():
            yield value
    elif isinstance(value, list):
        for element in value:
            yield from user_turns(element)
    elif isinstance(value, dict):
        role = value.get("role", value.get("from"))
        text = value.get("content", value.get("value"))
        if role is None or str(role).casefold() in _USER_ROLES:
            yield from user_turns(text)


def _functions(value: Any) -> tuple[str, ...]:
    names: list[str] = []
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, dict):
            inner = entry.get("function") if isinstance(entry.get("function"), dict) else entry
            name = inner.get("name", inner.get("api_name")) if isinstance(inner, dict) else None
            if isinstance(name, str) and function_name(name):
                names.append(function_name(name))
    return tuple(dict.fromkeys(names))


def at_path(entry: Any, field: str) -> Any:
    """The value at a dotted path (``question``, ``data.prompt``, ``turns.0.content``; ``*``
    takes every element of a list; a leading ``$.`` is allowed); None where it leads nowhere."""
    values = [entry]
    for step in field.removeprefix("$.").split("."):
        found: list[Any] = []
        for value in values:
            if step == "*" and isinstance(value, list):
                found.extend(value)
            elif isinstance(value, dict) and step in value:
                found.append(value[step])
            elif isinstance(value, list) and step.lstrip("-").isdigit() and -len(value) <= int(step) < len(value):
                found.append(value[int(step)])
        values = found
    return values if len(values) != 1 else values[0]


def _entry_turns(entry: Any, field: str | None) -> tuple[str, ...]:
    if field is not None:
        return tuple(user_turns(at_path(entry, field)))
    if isinstance(entry, str):
        return tuple(user_turns(entry))
    for key in AUTO_KEYS if isinstance(entry, dict) else ():
        if key in entry and (turns := tuple(user_turns(entry[key]))):
            return turns
    return ()


def _entries(path: Path) -> list[tuple[str | None, Any]]:
    """(id if the file's layout gives one, entry): a JSON-lines file's lines; a JSON list; the one
    list a JSON object holds (``{"data": [...]}``), else its values by key (``{id: entry}``)."""
    text = path.read_text(encoding="utf-8-sig")
    if path.suffix.casefold() in (".jsonl", ".ndjson"):
        return [(None, json.loads(line)) for line in text.splitlines() if line.strip()]
    data = json.loads(text)
    if isinstance(data, dict):
        lists = [value for value in data.values() if isinstance(value, list)]
        if len(lists) == 1:
            return [(None, entry) for entry in lists[0]]
        return [(str(key), entry) for key, entry in data.items()]
    return [(None, entry) for entry in (data if isinstance(data, list) else [data])]


def _entry_id(entry: Any, given: str | None, position: int) -> str:
    for key in _ID_KEYS if isinstance(entry, dict) else ():
        if isinstance(entry.get(key), (str, int)):
            return str(entry[key])
    return given if given is not None else str(position)


def user_set(name: str, path: str, field: str | None, where: str = "curate.decontaminate.files") -> EvaluationSet:
    """The items of a JSON or JSON-lines file; :class:`ConfigError` naming `where` when the file
    cannot be read or holds no question."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"{where}.path: no such file {path!r}")
    try:
        entries = _entries(file)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{where}.path: {path} is not a JSON or JSON-lines file ({exc})") from None
    items = []
    for position, (given, entry) in enumerate(entries):
        turns = _entry_turns(entry, field)
        if turns:
            functions = next((_functions(entry[k]) for k in _FUNCTION_KEYS if isinstance(entry, dict) and k in entry), ())
            items.append(Item(_entry_id(entry, given, position), turns, functions))
    if not items:
        looked = f"field {field!r}" if field is not None else f"any of the keys {', '.join(AUTO_KEYS)}"
        raise ConfigError(f"{where}.field: no question text at {looked} in {len(entries)} entries of {path}")
    return EvaluationSet(name, tuple(items), str(file))
