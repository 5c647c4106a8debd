"""The simulator stands apart: the product starts it as a process and never imports it.

pyproject.toml's import-linter contract says so (tests/test_layers.py runs it); this checks that
the contract lists every package of the product, and that no module names the simulator's
package in a dynamic import either."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _product_modules() -> list[Path]:
    files = [*ROOT.glob("flows/**/*.py"), *ROOT.glob("tasks/**/*.py"), *ROOT.glob("toolfactory/**/*.py")]
    return [path for path in files if "simulator" not in path.relative_to(ROOT).parts[:2]]


def test_the_contract_covers_every_package_of_the_product() -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (contract,) = [c for c in contracts if c.get("forbidden_modules") == ["toolfactory.simulator"]]
    children = {f"toolfactory.{path.stem if path.suffix else path.name}" for path in (ROOT / "toolfactory").iterdir()
                if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").exists()}
    assert children - {"toolfactory.simulator"} <= set(contract["source_modules"])
    assert {"flows", "tasks"} <= set(contract["source_modules"])


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def test_no_product_module_imports_the_simulator_dynamically() -> None:
    offending = []
    for path in _product_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and _called(node) in ("import_module", "__import__", "find_spec", "run_module"):
                named = [arg.value for arg in node.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str)]
                offending += [f"{path.relative_to(ROOT)}: {name}" for name in named if name.startswith("toolfactory.simulator")]
    assert offending == []
