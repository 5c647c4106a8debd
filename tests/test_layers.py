"""The layers of the code hold: no module imports from a layer above its own.

The contract is in pyproject.toml (`[tool.importlinter]`, docs/architecture.md §10); this runs
import-linter on this checkout's packages, so a new upward import fails the suite.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_no_module_imports_from_a_layer_above_its_own() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
         "--no-cache"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " kept, 0 broken" in result.stdout


def _contracted_modules() -> set[str]:
    """Every module a contract of pyproject.toml names: a layer, or a forbidden contract's side."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    named: set[str] = set()
    for contract in config["contracts"]:
        for layer in contract.get("layers", []):
            named.update(part.strip() for part in layer.replace(":", "|").split("|"))
        named.update(contract.get("source_modules", []))
        named.update(contract.get("forbidden_modules", []))
    return named


def test_every_package_of_toolfactory_is_in_a_contract() -> None:
    # A package no contract names may import anything: a new one must be given its layer.
    children = {f"toolfactory.{path.stem if path.suffix else path.name}" for path in (ROOT / "toolfactory").iterdir()
                if (path.suffix == ".py" and path.stem not in ("__init__", "__main__"))
                or (path.is_dir() and (path / "__init__.py").is_file())}
    assert len(children) > 15
    assert sorted(children - _contracted_modules()) == []
