"""Function names for OpenAI's API, which accepts only ``^[A-Za-z0-9_-]{1,64}$``.

Released data uses more (BFCL and xLAM: ``math.factorial``, ``requests.get``), and such a name is
valid tool-use data (see :mod:`toolfactory.definitions.validity`). An OpenAI export must still
send names the API accepts, so a name outside the limit is mapped: its characters outside the
alphabet become ``_``, it is cut to leave room, and ``-`` plus the first 8 hex digits of the
SHA-256 of the original name is appended. The mapping is a pure function, names OpenAI accepts
are kept as they are, and the hash keeps two originals apart (``a.b`` and ``a_b`` map to
different names), so :func:`original_name` restores the original from a record's source names.
"""

from __future__ import annotations

import hashlib
import re
from typing import Iterable

from toolfactory.definitions.validity import OPENAI_NAME

_OUTSIDE = re.compile(r"[^A-Za-z0-9_-]")
_SUFFIX = 9  # "-" and 8 hex digits


def openai_name(name: str) -> str:
    """`name` if OpenAI's API accepts it, else its deterministic, distinct mapping."""
    if OPENAI_NAME.match(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return f"{_OUTSIDE.sub('_', name)[: 64 - _SUFFIX]}-{digest}"


def original_name(exported: str, originals: Iterable[str]) -> str:
    """The name among `originals` that maps to `exported` (`exported` itself when none does)."""
    return next((name for name in originals if openai_name(name) == exported), exported)


__all__ = ["openai_name", "original_name"]
