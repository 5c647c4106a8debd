"""Local JSON pointers (``#/components/schemas/Item``, RFC 6901), as a `$ref` names them."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote


def pointer_target(document: Any, ref: str) -> tuple[bool, Any]:
    """(found, target) of the local `$ref` `ref` in `document` (%-encoding and ``~1``, ``~0``
    escapes undone); (False, None) for a reference that is not local or names nothing."""
    if not ref.startswith("#"):
        return False, None
    target = document
    for part in unquote(ref[1:]).split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(target, dict) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            return False, None
    return True, target
