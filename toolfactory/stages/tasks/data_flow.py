"""Which offered functions can feed each other: the data flow a dependent request needs.

A dependent request (ToolACE §2.2.1) needs a later call whose input comes from an earlier call's
result. That is only possible when some required parameter of one offered function can be
filled from what another returns; asking a model for such a request over functions without any
link gets a request that cannot be served as asked (the verify stage rejects its dialogue as
``dialogue_mode_mismatch``), after all its generation was paid for. A link is read from the
functions' documentation, as a reader would:

* the parameter's description names the earlier function ("Alert id as returned by
  list_active_alerts");
* the earlier function's `returns` schema has a field of the parameter's name (`symbol` in the
  matches of `search_symbols` for `get_quote(symbol)`), or an `id` inside a field named after
  it (`alerts[].id` for `alert_id`).

The earlier function must not itself require the parameter (then the user gives it to both).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from toolfactory.models import Function

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
MAX_FIELD_DEPTH = 4  # how deep a returns schema is searched for a field


@dataclass(frozen=True)
class Link:
    """`later`'s required `parameter` can come from `earlier`'s result."""

    earlier: str
    later: str
    parameter: str

    @property
    def carries_id(self) -> bool:
        """Whether the parameter is an identifier (`alert_id`, `medicationIds`)."""
        return _key(self.parameter).split("_")[-1] in ("id", "ids")

    def sentence(self) -> str:
        return f"{self.earlier}'s result gives the {self.parameter} that {self.later} needs"


def _key(name: str) -> str:
    """A field or parameter name compared without case or separators (`alertId`, `alert_id`)."""
    return "_".join(part.lower() for part in re.split(r"[^A-Za-z0-9]+", _CAMEL.sub("_", name)) if part)


def _singular(word: str) -> str:
    return word[:-1] if word.endswith("s") and not word.endswith("ss") else word


def _field_names(schema: Any, parent: str = "", depth: int = 0) -> Iterator[str]:
    """The names a result's fields go by: each property's own name, and `<parent>_<name>` for
    a property of an object (or list item) held in field `parent` (`alerts[].id` → `alert_id`)."""
    if not isinstance(schema, dict) or depth > MAX_FIELD_DEPTH:
        return
    items = schema.get("items")
    if isinstance(items, dict):
        yield from _field_names(items, parent, depth + 1)
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return
    for name, sub in properties.items():
        key = _key(str(name))
        yield key
        if parent:
            yield f"{_singular(parent.split('_')[-1])}_{key}"
        yield from _field_names(sub, key, depth + 1)


def _documented(parameter: dict[str, Any], earlier: str) -> bool:
    return bool(re.search(rf"\b{re.escape(earlier)}\b", str(parameter.get("description") or "")))


def links(functions: list[Function]) -> list[Link]:
    """Every link between two of `functions`, in their order."""
    fields = {fn.name: set(_field_names(fn.returns)) for fn in functions}
    found: list[Link] = []
    for later in functions:
        properties = later.parameters.get("properties") or {}
        for name in later.parameters.get("required") or []:
            parameter = properties.get(name)
            if not isinstance(parameter, dict):
                continue
            for earlier in functions:
                if earlier.name == later.name or name in (earlier.parameters.get("required") or []):
                    continue
                if _documented(parameter, earlier.name) or _key(str(name)) in fields[earlier.name]:
                    found.append(Link(earlier.name, later.name, str(name)))
    return found
