"""The linter and the type checker, run with the suite.

ruff checks the whole checkout with the rules of ``[tool.ruff]`` (bugs, not style). mypy checks
``toolfactory``, ``flows`` and ``tasks`` in strict mode as a ratchet (``tests/mypy_ratchet.py``):
a module's type errors may not rise above its count in ``tests/mypy_baseline.json``, and the strict
packages listed there have none. ``make mypy-baseline`` rewrites the counts.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mypy_ratchet import ROOT, Baseline, Finding, load_baseline, problems, run_mypy, updated


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)


def test_ruff_finds_nothing() -> None:
    done = _ruff(".")
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_ruff_applies_the_project_rules(tmp_path: Path) -> None:
    # The configuration is the one the check above uses: a name never defined is reported.
    sample = tmp_path / "sample.py"
    sample.write_text("def answer():\n    return undefined_name\n")
    done = _ruff("--config", str(ROOT / "pyproject.toml"), str(sample))
    assert done.returncode == 1 and "F821" in done.stdout, done.stdout + done.stderr


def test_no_module_has_more_type_errors_than_its_baseline() -> None:
    found = problems(run_mypy(), load_baseline())
    assert found == [], "\n" + "\n".join(found) + "\n(fix them; `make mypy-baseline` only counts what is left)"


def _error(path: str, line: int = 1) -> Finding:
    return Finding(path, line, 'Incompatible types in assignment (expression has type "str", variable has type "int")',
                   "assignment")


def test_the_ratchet_refuses_a_new_error_and_prints_it() -> None:
    baseline = Baseline(strict=["toolfactory.errors"], errors={"toolfactory.cli": 1})
    assert problems([_error("toolfactory/cli.py")], baseline) == []
    found = problems([_error("toolfactory/cli.py"), _error("toolfactory/cli.py", 7), _error("flows/execute.py")], baseline)
    assert found[0] == "flows.execute: 1 type errors, 0 allowed by tests/mypy_baseline.json:"
    assert found[2] == "toolfactory.cli: 2 type errors, 1 allowed by tests/mypy_baseline.json:"
    assert found[4].startswith("    toolfactory/cli.py:7: Incompatible types") and found[4].endswith("[assignment]")


def test_a_strict_package_may_have_no_error_and_the_update_refuses_to_count_one() -> None:
    baseline = Baseline(strict=["toolfactory.run"], errors={"toolfactory.run.pool": 3})
    assert problems([_error("toolfactory/run/__init__.py")], baseline)[0].startswith(
        "toolfactory.run: 1 type errors in toolfactory.run, which must have none (strict)")
    assert updated([_error("toolfactory/cli.py"), _error("toolfactory/cli.py", 2)], baseline) == Baseline(
        strict=["toolfactory.run"], errors={"toolfactory.cli": 2})
    try:
        updated([_error("toolfactory/run/pool.py")], baseline)
    except SystemExit as refused:
        assert "toolfactory/run/pool.py:1" in str(refused)
    else:
        raise AssertionError("the update counted an error of a strict package")
