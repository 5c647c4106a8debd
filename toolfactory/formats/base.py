"""What every reader shares: :class:`FormatError`, the reason codes, and JSON/JSONL helpers.

The reader contract (every module of :mod:`toolfactory.formats`)::

    read(path) -> Iterator[Dialogue | FormatError]

* One item per input record, in input order: the i-th item is record i (0-based), so a consumer
  can count records, and ``FormatError.index`` is that position. What a "record" is depends on
  the format (a JSONL line, an element of a JSON list, a ToolBench answer file, a ToolAlpaca
  (instruction, golden answer) pair); blank JSONL lines are not records.
* `path` is a file or a folder. A folder is read file by file, in name order, its records
  numbered across files (:func:`read_files`): the files of the format's patterns directly in
  it (``*.jsonl`` and ``*.json`` for the JSON-lines formats), so an export's folder reads as one
  dataset; a file of the folder that cannot be read at all is one FormatError there.
* Every file is decoded by :func:`file_text`: UTF-8, a byte-order mark at its start dropped
  (the mark some editors write), in every format.
* A record that cannot be turned into a :class:`~toolfactory.models.Dialogue` yields a
  :class:`FormatError` with a stable reason code, and reading goes on with the next record.
  Whatever one record holds, reading it never fails the file: JSONL is read line by line as
  bytes (a line that is not UTF-8 is that record's ``record_not_json``), ``NaN`` / ``Infinity``
  are not JSON and a number beyond a double's range (``1e400``) is none either
  (``record_not_json``), and any other exception while reading one record (a value a library
  refuses) is ``record_unreadable`` with the exception's one-line text (:func:`guarded`).
* **An integer longer than Python converts** (more than 4,300 digits, ``sys.get_int_max_str_digits``)
  is valid JSON that no part of toolfactory can read, so its record is ``record_unreadable``
  (:data:`LONG_INTEGER`: ``an integer of N digits: longer than Python converts (4300 digits)``) in every
  format, wherever the record holds it: in the file's JSON, in JSON text a field holds (xLAM's
  ``tools`` and ``answers``, ShareGPT's ``function_call``, ToolAlpaca's ``Documentation``, BFCL's
  call text), or in a call's arguments or a tool's response, which the readers otherwise keep as
  text for the rules (:func:`guarded` looks there). A record the reader can read is judged by the
  verifier; one the verifier could not parse is not handed to it.
* Only a problem with the file as a whole (missing, unreadable, a JSON document that does not
  parse, the wrong top-level shape) raises :class:`UnreadableFile`.
* Readers do not repair or judge content: argument text is kept as the file has it (an argument
  string that is not JSON is for ``call_arguments_not_json`` to find), names are not corrected,
  nothing is dropped. A FormatError means "no dialogue can be built", never "the dialogue is bad".
* Records without an id get a deterministic one: :func:`content_id` of the record's JSON.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import asdict, dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Collection, Iterable, Iterator

from pydantic import ValidationError

from toolfactory.errors import TerminalError, ToolfactoryError
from toolfactory.models import Dialogue, Function, Message, canonical_json, stable_id
from toolfactory.render.parsed import NonStandardNumber, finite_float, standard_json

# Reason codes of FormatError (stable: they are counted in verify reports).
RECORD_NOT_JSON = "record_not_json"  # a JSONL line (or a record file) that does not parse
RECORD_NOT_OBJECT = "record_not_object"  # a record that is not a JSON object
MISSING_FIELD = "missing_field"  # a field the format requires is absent or empty
WRONG_TYPE = "wrong_type"  # a field has the wrong JSON type
FIELD_NOT_JSON = "field_not_json"  # a field holding JSON text (xLAM tools/answers) does not parse
BAD_TOOL = "bad_tool"  # a tool or function definition cannot be converted
UNKNOWN_ROLE = "unknown_role"  # a message role the format does not define
INVALID_RECORD = "invalid_record"  # the canonical model rejects the converted record
NO_TRAIN_MESSAGES = "no_train_messages"  # ToolBench: the search gave no answer, no path is released
RECORD_TOO_DEEP = "record_too_deep"  # nested deeper than Python's JSON parser can follow (~1,000 levels)
RECORD_UNREADABLE = "record_unreadable"  # any other failure to read one record (the exception's one-line text)

# Why a rule cannot judge an imported record, by rule code (a format's NOT_APPLICABLE_REASONS picks
# from these). The verify report skips these rules for the format and lists them.
DERIVED_MODE = {
    "dialogue_no_function_call": "the source states no mode: it is derived from the calls, so a dialogue "
                                 "without calls is non_tool and the rule cannot fail",
}
# A calls-only record (a user request and the calls that serve it, with no tool responses and no
# final answer: xLAM, ToolAlpaca's golden answers) lacks the subject of these rules: they would fail
# on every record (unanswered calls, no final answer) or pass without looking at anything.
CALLS_ONLY = {
    "sample_unanswered_call": "the records hold no tool responses, so every call would be unanswered",
    "dialogue_no_final_answer": "the records end with the calls: there is no final answer",
    "sample_response_name_mismatch": "no tool responses to compare with the calls",
    "filter_parse_error": "no tool responses that could carry an execution error",
    "dialogue_incomplete_answer": "no final answer that could be cut off",
    "dialogue_answer_too_long": "no assistant text",
    "dialogue_mixed_language": "no assistant text",
    **DERIVED_MODE,
}

REASONS = frozenset({
    RECORD_NOT_JSON, RECORD_NOT_OBJECT, MISSING_FIELD, WRONG_TYPE, FIELD_NOT_JSON, BAD_TOOL,
    UNKNOWN_ROLE, INVALID_RECORD, NO_TRAIN_MESSAGES, RECORD_TOO_DEEP, RECORD_UNREADABLE,
})
TOO_DEEP_MESSAGE = "nested too deep to parse (Python's JSON parser follows about 1,000 levels)"


@dataclass(frozen=True)
class FormatError:
    """A record that could not be read: its position, a reason code and a message.

    `where` locates the record in the input for a human ("line 7", "10_ChatGPT_DFS.json",
    "Axolotl/Golden_Answers[3]").
    """

    index: int
    reason: str
    message: str
    where: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class UnreadableFile(TerminalError):
    """The input as a whole cannot be read (no record-level recovery is possible)."""


class Malformed(ToolfactoryError):
    """Raised inside a reader's conversion of one record; the reader turns it into a FormatError."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def content_id(fmt: str, raw: Any) -> str:
    """The deterministic id of a record that has none: a hash of the format and its content."""
    text = canonical_json(raw)
    # A lone surrogate (JSON's "\ud800") cannot be encoded to hash it: hashed as its escape, the
    # record gets an id and the rules judge it (dialogue_invalid_characters). Valid text is unchanged.
    return stable_id(fmt, text.encode("utf-8", "backslashreplace").decode("utf-8"))


def exception_line(exc: BaseException, limit: int = 300) -> str:
    """An exception as one line of at most `limit` characters: its type and its text."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


LONG_INTEGER = "an integer of {digits} digits: longer than Python converts ({limit} digits)"
_INT_LIMIT = re.compile(r"Exceeds the limit \((\d+) digits\) for integer string conversion(?:: value has (\d+) digits)?")


def long_integer(exc: BaseException) -> str | None:
    """The message of :data:`LONG_INTEGER` when `exc` is Python's refusal to convert an integer
    that long (``json``'s ValueError, ``ast``'s SyntaxError), else None."""
    found = _INT_LIMIT.search(str(exc)) if isinstance(exc, (ValueError, SyntaxError)) else None
    if found is None:
        return None
    return LONG_INTEGER.format(digits=found.group(2) or f"more than {found.group(1)}", limit=found.group(1))


def unreadable(exc: BaseException) -> str:
    """The message of a ``record_unreadable`` record that failed with `exc`."""
    return long_integer(exc) or exception_line(exc)


@lru_cache(maxsize=4)
def _digit_run(limit: int) -> re.Pattern[str]:
    # Anchored at the start of a run of digits, so the scan stays linear in the text's length.
    return re.compile(rf"(?<![0-9])[0-9]{{{limit + 1}}}")


def long_integer_in(dialogue: Dialogue) -> str | None:
    """Where and what (:data:`LONG_INTEGER`) of the first call arguments or tool response that
    holds, as JSON, an integer longer than Python converts; None when none does. Only a text
    with such a run of digits is parsed: a long number inside a string is no integer."""
    limit = sys.get_int_max_str_digits()
    if not limit:
        return None
    run = _digit_run(limit)
    for i, message in enumerate(dialogue.messages):
        texts = [(f"messages[{i}].tool_calls[{j}].arguments", call.arguments) for j, call in enumerate(message.tool_calls or ())]
        if message.role == "tool" and message.content:
            texts.append((f"messages[{i}].content", message.content))
        for where, text in texts:
            if not run.search(text):
                continue
            try:
                standard_json(text)
            except ValueError as exc:
                found = long_integer(exc)
                if found is not None:
                    return f"{where}: {found}"
            except RecursionError:
                pass  # the rules' limits judge a text nested that deep
    return None


def json_text(value: Any) -> str:
    """A value as argument/content text: a string is kept as is, anything else is dumped as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def derive_mode(messages: list[Message]) -> str:
    """The mode of an imported dialogue, which the source does not state: ``non_tool`` (no call),
    ``single`` (all calls in one assistant turn, parallel ones included) or ``multiple``."""
    turns = sum(1 for m in messages if m.tool_calls)
    return "non_tool" if turns == 0 else "single" if turns == 1 else "multiple"


def validation_message(exc: ValidationError) -> str:
    """The first error of a pydantic ValidationError, with its location, in one line."""
    first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": str(exc)}
    where = ".".join(str(part) for part in first.get("loc", ()))
    more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return f"{where}: {first.get('msg', '')}{more}" if where else f"{first.get('msg', '')}{more}"


def require_path(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise UnreadableFile(f"{path}: no such file or directory")
    return path


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


BOM = b"\xef\xbb\xbf"  # UTF-8's byte-order mark, which some editors write at the start of a file


def file_text(data: bytes, errors: str = "strict") -> str:
    """A file's bytes (or its first line's) as text: UTF-8, without a byte-order mark at the start.
    Every reader decodes what it reads through this function, so a file that starts with the mark
    reads as the same file without it, in every format."""
    return data.removeprefix(BOM).decode("utf-8", errors)


def read_text(path: Path) -> str:
    """The text of the file at `path` (:func:`file_text`); raises OSError and UnicodeDecodeError."""
    return file_text(path.read_bytes())


def _first_char(path: Path) -> str:
    """The first non-blank character of the file (read as bytes: a bad byte later is one record's)."""
    with path.open("rb") as handle:
        start = True
        while True:
            chunk = handle.read(4096)
            if not chunk:
                return ""
            if start:
                chunk, start = chunk.removeprefix(BOM), False
            stripped = chunk.lstrip()
            if stripped:
                return chr(stripped[0])


@dataclass(frozen=True)
class Refused:
    """A value of a JSON document that one record cannot hold (NaN, an integer longer than Python
    converts): kept in place of the value, so that record alone is refused (:func:`refused_in`)."""

    reason: str
    message: str


def json_document(text: str) -> tuple[Any, bool]:
    """`text` parsed as one JSON document in which a value JSON or Python refuses becomes a
    :class:`Refused` in its place (the document's other records stay readable), and whether it
    holds any; raises what :func:`json.loads` raises for text that does not parse."""
    try:
        return standard_json(text), False
    except NonStandardNumber:
        pass
    except json.JSONDecodeError:
        raise
    except ValueError:
        pass  # an integer longer than Python converts
    # Rare: parsed again, marking each refused value.
    return json.loads(text, parse_constant=_refused_constant, parse_int=_integer, parse_float=_float), True


NOT_UTF8_STRING = "not UTF-8 text: a string holds bytes that are not UTF-8"
_ESCAPED_BYTE = re.compile("[\udc80-\udcff]")  # a byte that is not UTF-8, as surrogateescape decodes it


def document_text(data: bytes) -> tuple[str, bool]:
    """A JSON document's bytes as text (UTF-8, a BOM dropped), and whether some bytes are not
    UTF-8: those are decoded with ``surrogateescape`` (:func:`read_document` refuses the records
    that hold them), so one bad byte does not make the whole document unreadable."""
    try:
        return file_text(data), False
    except UnicodeDecodeError:
        return file_text(data, errors="surrogateescape"), True


def read_document(path: Path) -> tuple[Any, bool]:
    """The document of `path` as :func:`json_document` parses it, a string that holds bytes that
    are not UTF-8 replaced by a :class:`Refused` (``record_not_json``) so that only the records
    holding one are refused. Raises ``OSError``, and the ``UnicodeDecodeError`` of the first bad
    byte when the document does not parse with them (a bad byte outside any string); otherwise
    what :func:`json_document` raises. In a document with such bytes, a string holding an escaped
    lone surrogate of the same range (``"\\udc80"``) is refused too."""
    data = path.read_bytes()
    text, escaped = document_text(data)
    if not escaped:
        return json_document(text)
    try:
        value = json_document(text)[0]
    except json.JSONDecodeError:
        file_text(data)  # raises the UnicodeDecodeError that names the first bad byte
        raise
    return _refuse_escaped(value), True


def _refuse_escaped(value: Any) -> Any:
    """`value` with each string (or the value under each key) holding an escaped byte refused."""
    refused = Refused(RECORD_NOT_JSON, NOT_UTF8_STRING)
    if isinstance(value, str):
        return refused if _ESCAPED_BYTE.search(value) else value
    stack = [value]
    while stack:  # without recursion: records may be deep
        item = stack.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for key, child in list(pairs):
            if (isinstance(child, str) and _ESCAPED_BYTE.search(child)) or (isinstance(key, str) and _ESCAPED_BYTE.search(key)):
                item[key] = refused
            elif isinstance(child, (dict, list)):
                stack.append(child)
    return value


def _refused_constant(name: str) -> Refused:
    return Refused(RECORD_NOT_JSON, f"not JSON: {name} is not a JSON number")


def _float(text: str) -> float | Refused:
    try:
        return finite_float(text)
    except NonStandardNumber as exc:  # 1e400
        return Refused(RECORD_NOT_JSON, f"not JSON: {exc}")


def _integer(digits: str) -> int | Refused:
    try:
        return int(digits)
    except ValueError as exc:
        return Refused(RECORD_UNREADABLE, unreadable(exc))


def refused_in(value: Any) -> Refused | None:
    """The first :class:`Refused` within `value` (without recursion: records may be deep)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, Refused):
            return item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def load_json_file(path: Path) -> Any:
    """The parsed content of a file that is one JSON document (see :func:`json_document` for the
    values one record cannot hold); :class:`UnreadableFile` otherwise."""
    try:
        return read_document(path)[0]
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableFile(f"{path}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UnreadableFile(f"{path}: not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
    except RecursionError:
        raise UnreadableFile(f"{path}: {TOO_DEEP_MESSAGE}") from None


def iter_json_records(path: str | Path) -> Iterator[tuple[int, str, Any]]:
    """(index, where, value) of each record of a JSON list file or a JSONL file.

    A file whose first character is ``[`` is one JSON list (each element a record, the file parsed
    at once; an element holding a value JSON or Python refuses yields its FormatError); a file
    that is one JSON object spread over several lines is one record; otherwise each non-blank line
    is a record (read line by line, as bytes), and a line that does not parse yields a
    :class:`FormatError` as its value.
    """
    path = require_path(path)
    if path.is_dir():
        raise UnreadableFile(f"{path}: a file is expected, not a directory")
    try:
        first = _first_char(path)
        if first == "[":
            try:
                items, refusals = read_document(path)
            except json.JSONDecodeError as exc:
                raise UnreadableFile(f"{path}: not a JSON list: {exc.msg} (line {exc.lineno}, column {exc.colno})") from None
            except RecursionError:
                raise UnreadableFile(f"{path}: {TOO_DEEP_MESSAGE}; as JSONL, each other record would be read") from None
            if not isinstance(items, list):
                raise UnreadableFile(f"{path}: a JSON list of records is expected")
            for index, item in enumerate(items):
                refused = refused_in(item) if refusals else None
                where = f"[{index}]"
                yield index, where, item if refused is None else FormatError(index, refused.reason, refused.message, where)
            return
        with path.open("rb") as handle:
            index = 0
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                value = parsed_line(index, number, line)
                if index == 0 and first == "{" and isinstance(value, FormatError) and value.reason == RECORD_NOT_JSON:
                    whole = _whole_object(path)
                    if whole is not None:  # one pretty-printed record
                        yield 0, "line 1", whole
                        return
                yield index, f"line {number}", value
                index += 1
    except OSError as exc:
        raise UnreadableFile(f"{path}: {exc}") from None
    except UnicodeDecodeError as exc:  # a bad byte outside any string: the JSON list does not parse
        raise UnreadableFile(f"{path}: not UTF-8 text: {exc.reason} (byte {exc.start + 1})") from None


def _whole_object(path: Path) -> dict[str, Any] | None:
    try:
        value, refusals = read_document(path)
    except (ValueError, RecursionError):  # not JSON, not UTF-8
        return None
    return value if isinstance(value, dict) and not refusals else None


def parse_json_field(record: dict[str, Any], key: str, expected: type | tuple[type, ...]) -> Any:
    """`record[key]`, parsed when it is JSON text (xLAM stores lists as strings), of `expected` type."""
    if key not in record or record[key] is None:
        raise Malformed(MISSING_FIELD, f"no {key!r} field")
    value = record[key]
    if isinstance(value, str) and expected is not str:
        try:
            value = standard_json(value)
        except json.JSONDecodeError as exc:
            raise Malformed(FIELD_NOT_JSON, f"{key!r} is not JSON: {exc.msg} (column {exc.colno})") from None
        except NonStandardNumber as exc:
            raise Malformed(FIELD_NOT_JSON, f"{key!r} is not JSON: {exc}") from None
        except ValueError as exc:
            raise Malformed(RECORD_UNREADABLE, f"{key!r}: {unreadable(exc)}") from None
    if not isinstance(value, expected):
        names = expected.__name__ if isinstance(expected, type) else " or ".join(t.__name__ for t in expected)
        raise Malformed(WRONG_TYPE, f"{key!r} must be a {names}, not {type(value).__name__}")
    return value


def record_id(fmt: str, record: dict[str, Any]) -> str:
    """The id a reader gives `record` of format `fmt`: its own ``id``, else :func:`content_id`."""
    return str(record["id"]) if record.get("id") not in (None, "") else content_id(fmt, record)


def build_dialogue(fmt: str, record: dict[str, Any], tools: list[Function], messages: list[Message]) -> Dialogue:
    """The canonical record for `record` (:func:`record_id`), or Malformed."""
    identifier = record_id(fmt, record)
    try:
        return Dialogue(id=identifier, task_id=identifier, tools=tools, messages=messages, recipe=fmt, mode=derive_mode(messages))
    except ValidationError as exc:
        raise Malformed(INVALID_RECORD, validation_message(exc)) from None


def guarded(index: int, where: str, build: Callable[[], Dialogue]) -> Dialogue | FormatError:
    """`build()`, or the FormatError of record `index` saying why it failed: the reason a reader
    gave (:class:`Malformed`), ``invalid_record`` for a value the canonical model refuses,
    ``record_too_deep``, and ``record_unreadable`` for any other exception and for an integer
    longer than Python converts in the record's call arguments or tool responses
    (:func:`long_integer_in`), so that one record never ends the reading of the others."""
    try:
        dialogue = build()
        found = long_integer_in(dialogue)
    except Malformed as exc:
        return FormatError(index, exc.reason, exc.message, where)
    except ValidationError as exc:  # a message the canonical model refuses
        return FormatError(index, INVALID_RECORD, validation_message(exc), where)
    except RecursionError:  # hashing or validating a value nested deeper than Python recurses
        return FormatError(index, RECORD_TOO_DEEP, TOO_DEEP_MESSAGE, where)
    except Exception as exc:  # noqa: BLE001 - whatever one record holds, the others are read
        return FormatError(index, RECORD_UNREADABLE, unreadable(exc), where)
    return dialogue if found is None else FormatError(index, RECORD_UNREADABLE, found, where)


def converted(index: int, where: str, value: Any, to_dialogue: Callable[[Any], Dialogue]) -> Dialogue | FormatError:
    """One parsed record through `to_dialogue`, or the FormatError that says why it cannot be."""
    if isinstance(value, FormatError):
        return value
    return guarded(index, where, lambda: to_dialogue(value))


def text_error(index: int, where: str, exc: BaseException) -> FormatError:
    """The FormatError of record `index` whose JSON text failed to parse with `exc`."""
    if isinstance(exc, UnicodeDecodeError):
        return FormatError(index, RECORD_NOT_JSON, f"not UTF-8 text: {exc.reason} (byte {exc.start + 1})", where)
    if isinstance(exc, json.JSONDecodeError):
        at = f"column {exc.colno}" if exc.lineno == 1 else f"line {exc.lineno}, column {exc.colno}"
        return FormatError(index, RECORD_NOT_JSON, _short(f"not JSON: {exc.msg} ({at})"), where)
    if isinstance(exc, NonStandardNumber):
        return FormatError(index, RECORD_NOT_JSON, f"not JSON: {exc}", where)
    if isinstance(exc, RecursionError):
        return FormatError(index, RECORD_TOO_DEEP, TOO_DEEP_MESSAGE, where)
    return FormatError(index, RECORD_UNREADABLE, unreadable(exc), where)


def parsed_line(index: int, number: int, line: bytes | str) -> Any:
    """The value of JSONL line `number` (record `index`; bytes are decoded as UTF-8, a BOM on the
    first line dropped: :func:`file_text`), or its FormatError."""
    where = f"line {number}"
    try:
        text = line if isinstance(line, str) else file_text(line) if number == 1 else line.decode("utf-8")
        return standard_json(text)
    except Exception as exc:  # noqa: BLE001 - RecursionError too: text_error names each
        return text_error(index, where, exc)


JSON_FILES = ("*.jsonl", "*.json")  # the files of a folder that the JSON-lines formats read


def dataset_files(path: Path, patterns: Iterable[str], skip: Collection[str] = ()) -> list[Path]:
    """The files read for `path`: the file itself, or the files directly in the folder `path`
    whose names match one of `patterns` (but none of `skip`), in name order."""
    path = require_path(path)
    if not path.is_dir():
        return [path]
    patterns = tuple(patterns)
    files = sorted({file for pattern in patterns for file in path.glob(pattern) if file.is_file() and file.name not in skip})
    if not files:
        raise UnreadableFile(f"{path}: no {' or '.join(patterns)} files in the folder")
    return files


def read_files(path: str | Path, patterns: Iterable[str], read_file: Callable[[Path], Iterable[Dialogue | FormatError]],
               skip: Collection[str] = ()) -> Iterator[Dialogue | FormatError]:
    """The records of `path` as `read_file` reads a file: of the file itself, or of each file of
    the folder (:func:`dataset_files`) in turn, numbered across files, a FormatError's ``where``
    prefixed with its file's name; a file of the folder that cannot be read at all is one
    ``record_not_json`` there, and the other files are read."""
    path = require_path(path)
    if not path.is_dir():
        yield from read_file(path)
        return
    index = 0
    for file in dataset_files(path, patterns, skip):
        try:
            for item in read_file(file):
                yield item if isinstance(item, Dialogue) else replace(item, index=index, where=f"{file.name} {item.where}".strip())
                index += 1
        except UnreadableFile as exc:
            yield FormatError(index, RECORD_NOT_JSON, str(exc).removeprefix(f"{file}: "), file.name)
            index += 1


def read_json_records(path: str | Path, to_dialogue: Callable[[Any], Dialogue],
                      skip: Collection[str] = ()) -> Iterator[Dialogue | FormatError]:
    """Each record of a JSON list or JSONL file (or of each such file of a folder, :func:`read_files`)
    through `to_dialogue`; a bad one as a FormatError."""
    def one_file(file: Path) -> Iterator[Dialogue | FormatError]:
        for index, where, value in iter_json_records(file):
            yield converted(index, where, value, to_dialogue)

    return read_files(path, JSON_FILES, one_file, skip)
