"""The shape of the code: its largest functions, and the modules that name a recipe.

    python -m benchmarks.code_shape [--top 10] [--package toolfactory] [--json]

Two figures a design change can be judged by, read from the source with :mod:`ast` (nothing is
imported or run):

* the largest functions (methods and nested functions included) by lines, from the ``def`` line
  (or its first decorator) to the last line of the body;
* the modules that name a generation recipe (``"toolalpaca"``, ``"toolllm"``, ``"toolace"``) as a
  string constant: each one is a place that changes when a recipe is added or renamed. A module
  that uses the name of a dataset format which happens to equal a recipe's (the ToolAlpaca
  format, say) is counted too; the figure is the plain count, as ``grep`` gives it.
"""

from __future__ import annotations

import argparse
import ast
import json
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE_NAMES = ("toolalpaca", "toolllm", "toolace")
RECIPE_PACKAGES = ("toolfactory", "flows", "tasks")


@dataclass(frozen=True)
class FunctionSize:
    name: str  # qualified within its module: Class.method, outer.<locals>.inner
    module: str
    line: int
    lines: int


def _python_files(package: str) -> list[Path]:
    return sorted(p for p in (ROOT / package).rglob("*.py") if "__pycache__" not in p.parts)


def function_sizes(path: Path) -> list[FunctionSize]:
    """Every function of the module at `path`, with its size in lines."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    module = path.relative_to(ROOT).as_posix()
    found: list[FunctionSize] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                last = child.end_lineno or child.lineno
                found.append(FunctionSize(f"{prefix}{child.name}", module, first, last - first + 1))
                visit(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def largest_functions(package: str = "toolfactory", top: int = 10) -> list[FunctionSize]:
    sizes = [size for path in _python_files(package) for size in function_sizes(path)]
    return sorted(sizes, key=lambda s: (-s.lines, s.module, s.line))[:top]


def names_a_recipe(path: Path, names: tuple[str, ...] = RECIPE_NAMES) -> bool:
    """Whether the module at `path` holds one of `names` as a whole string constant."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return any(isinstance(node, ast.Constant) and node.value in names for node in ast.walk(tree))


def modules_naming_a_recipe(packages: tuple[str, ...] = RECIPE_PACKAGES) -> list[str]:
    return [path.relative_to(ROOT).as_posix() for package in packages for path in _python_files(package)
            if names_a_recipe(path)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--package", default="toolfactory")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    largest = largest_functions(args.package, args.top)
    naming = modules_naming_a_recipe()
    if args.json:
        print(json.dumps({"largest_functions": [asdict(s) for s in largest], "modules_naming_a_recipe": naming}, indent=2))
        return
    print(f"{args.top} largest functions in {args.package}/ (lines):")
    for size in largest:
        print(f"  {size.lines:5d}  {size.module}:{size.line}  {size.name}")
    print(f"\nmodules naming a recipe as a string constant: {len(naming)}")
    for module in naming:
        print(f"  {module}")


if __name__ == "__main__":
    main()
