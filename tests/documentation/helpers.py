"""Access to the documentation's generators (docs/hooks/), which MkDocs loads from their folder."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "docs" / "hooks"


def generator(name: str) -> ModuleType:
    """A module of docs/hooks/, imported as MkDocs imports the hook (its folder on sys.path)."""
    if str(HOOKS) not in sys.path:
        sys.path.insert(0, str(HOOKS))
    return importlib.import_module(name)


def section(page: str, heading: str) -> str:
    """The text of `page` from the heading line that starts with `heading` to the next heading of
    the same level."""
    level = heading.split(" ", 1)[0]
    start = page.index("\n" + heading) + 1
    end = page.find("\n" + level + " ", start + len(heading))
    return page[start:] if end < 0 else page[start:end]
