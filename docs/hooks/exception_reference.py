"""The exception reference, generated from the code's classes.

griffe (the reader behind mkdocstrings) reads ``toolfactory``, ``flows`` and ``tasks`` without
importing them and resolves each class's bases through the imports, so the page lists every
exception class the code defines: its place under :class:`toolfactory.errors.ToolfactoryError`,
its bases, its module and the first paragraph of its docstring. A class is an exception when a
base, followed through the project's classes, is one of Python's exceptions (``ValueError``, …).
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import griffe

from prose import code, first_paragraph

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("toolfactory", "flows", "tasks")
BASE = "toolfactory.errors.ToolfactoryError"


@dataclass
class ExceptionClass:
    path: str  # module.Class
    module: str
    bases: list[str]  # the project's classes by path, Python's by name
    summary: str  # the docstring's first paragraph

    @property
    def name(self) -> str:
        return self.path.rsplit(".", 1)[1]


def _classes(obj: griffe.Object | griffe.Alias) -> Iterator[griffe.Class]:
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Class):
            yield member
            yield from _classes(member)
        elif isinstance(member, griffe.Module):
            yield from _classes(member)


def _base_path(expression: object) -> str:
    return getattr(expression, "canonical_path", None) or str(expression)


def _defined_order(item: tuple[str, griffe.Class]) -> tuple[bool, str, int]:
    """``toolfactory/errors.py`` first, then the other modules by name; in a module, as it defines."""
    cls = item[1]
    return (cls.module.path != "toolfactory.errors", cls.module.path, cls.lineno or 0)


def exception_classes(packages: tuple[str, ...] = PACKAGES, search_paths: tuple[Path, ...] = (ROOT,)
                      ) -> dict[str, ExceptionClass]:
    """Every exception class of `packages`, by path, in the order the modules define them."""
    loader = griffe.GriffeLoader(search_paths=[str(path) for path in search_paths])
    loaded = [loader.load(name) for name in packages]
    loader.resolve_aliases(implicit=False, external=False)
    classes = {cls.path: cls for package in loaded for cls in _classes(package)}
    verdict: dict[str, bool] = {}

    def is_exception(path: str) -> bool:
        if path not in verdict:
            verdict[path] = False  # a cycle of unresolved names is not an exception
            if path in classes:
                verdict[path] = any(is_exception(_base_path(base)) for base in classes[path].bases)
            else:
                found = getattr(builtins, path, None)
                verdict[path] = isinstance(found, type) and issubclass(found, BaseException)
        return verdict[path]

    return {
        path: ExceptionClass(path, cls.module.path, [_base_path(base) for base in cls.bases],
                             first_paragraph(cls.docstring.value if cls.docstring else ""))
        for path, cls in sorted(classes.items(), key=_defined_order)
        if is_exception(path)
    }


def outside_the_tree(found: dict[str, ExceptionClass]) -> list[str]:
    """The exception classes that do not derive from ``ToolfactoryError``."""

    def inside(path: str) -> bool:
        return path == BASE or any(inside(base) for base in found[path].bases if base in found)

    return [path for path in found if not inside(path)]


def _tree(found: dict[str, ExceptionClass]) -> list[tuple[int, ExceptionClass]]:
    """(depth, class) in depth-first order from ToolfactoryError: each class under its first base
    that is a project exception; the classes outside the tree follow at depth 0."""
    children: dict[str | None, list[ExceptionClass]] = {}
    for exc in found.values():
        parent = next((base for base in exc.bases if base in found), None)
        children.setdefault(parent, []).append(exc)
    out: list[tuple[int, ExceptionClass]] = []

    def walk(exc: ExceptionClass, depth: int) -> None:
        out.append((depth, exc))
        for child in children.get(exc.path, []):
            walk(child, depth + 1)

    for root in sorted(children.get(None, []), key=lambda exc: exc.path != BASE):
        walk(root, 0)
    return out


def _drawing(tree: list[tuple[int, ExceptionClass]]) -> str:
    """The tree drawn as ``errors.py``'s docstring draws it."""

    def goes_on(index: int, depth: int) -> bool:
        """Whether a class at `depth` follows position `index` before the tree climbs above it."""
        for later, _ in tree[index + 1:]:
            if later <= depth:
                return later == depth
        return False

    lines = []
    for index, (depth, exc) in enumerate(tree):
        rails = "".join("│   " if goes_on(index, level) else "    " for level in range(1, depth))
        branch = ("├── " if goes_on(index, depth) else "└── ") if depth else ""
        lines.append(f"{rails}{branch}{exc.name}")
    return "\n".join(lines)


def page(found: dict[str, ExceptionClass] | None = None) -> str:
    """The whole Markdown page (of the project's exception classes, or of `found`)."""
    found = exception_classes() if found is None else found
    tree = _tree(found)
    rows = [
        f"| {'&nbsp;' * 4 * depth}{code(exc.name)} | {', '.join(code(b.rsplit('.', 1)[-1]) for b in exc.bases)} | "
        f"{code(exc.module)} | {exc.summary.replace('|', '&#124;')} |"
        for depth, exc in tree
    ]
    outside = outside_the_tree(found)
    return "\n".join([
        "# Exceptions",
        "",
        "Every exception the code defines, generated from the classes at each build. All derive from",
        "`ToolfactoryError` (`toolfactory/errors.py`), which pickles whatever its `__init__` takes, so",
        "an error crosses from a Ray worker to the driver intact. `TerminalError` means a retry cannot",
        "help, `TransientError` that it may (shard tasks retry these), `ConfigError` that the",
        "configuration is wrong; a class that also derives from a Python exception (`ValueError`, …)",
        "is caught as that one too.",
        "",
        "```text",
        _drawing(tree),
        "```",
        "",
        "| class | bases | module | what it means |",
        "| --- | --- | --- | --- |",
        *rows,
        "",
        *([f"Outside the tree (to be moved under `ToolfactoryError`): {', '.join(code(p) for p in outside)}.", ""]
          if outside else []),
    ])
