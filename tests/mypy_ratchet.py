"""mypy as a ratchet: the type errors of a module may fall, never rise.

Every module of ``toolfactory``, ``flows`` and ``tasks`` is checked in strict mode
(``[tool.mypy]`` in pyproject.toml). Most of the code predates the check, so
``tests/mypy_baseline.json`` holds, per module, the errors it had when the baseline was last
written (``errors``), and the packages that have none and must keep none (``strict``). The suite
(``tests/test_static_checks.py``) fails when a module has more errors than its count (a module
the baseline does not list may have none), and prints that module's errors.

    python -m tests.mypy_ratchet            check, as the suite does
    python -m tests.mypy_ratchet --update   rewrite the counts (make mypy-baseline)

``--update`` keeps ``strict`` as it is and refuses to count an error in one of its packages; it
names the packages that have become clean, which can then join ``strict`` by hand. mypy keeps its
cache in ``.mypy_cache``, so a check after a small change takes seconds rather than a minute.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

ROOT = Path(__file__).resolve().parents[1]
BASELINE = ROOT / "tests" / "mypy_baseline.json"


class Baseline(TypedDict):
    strict: list[str]  # packages (and their modules) that must have no error
    errors: dict[str, int]  # module -> the errors it may have


@dataclass(frozen=True)
class Finding:
    """One error mypy reports: where, what, and its error code."""

    path: str  # relative to the checkout
    line: int
    message: str
    code: str | None

    @property
    def module(self) -> str:
        parts = list(Path(self.path).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}" + (f"  [{self.code}]" if self.code else "")


def run_mypy() -> list[Finding]:
    """The errors mypy finds in the files ``[tool.mypy]`` names, with this checkout's settings."""
    done = subprocess.run([sys.executable, "-m", "mypy", "--output", "json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=1200, check=False)
    if done.returncode not in (0, 1):  # 2: mypy could not run (a bad option, a crash)
        raise RuntimeError(f"mypy exited with {done.returncode}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    errors = []
    for line in done.stdout.splitlines():
        if not line.startswith("{"):
            continue
        found = json.loads(line)
        if found["severity"] == "error":
            path = Path(found["file"])
            relative = path.relative_to(ROOT) if path.is_absolute() else path
            errors.append(Finding(relative.as_posix(), found["line"], found["message"], found["code"]))
    if done.returncode == 1 and not errors:
        raise RuntimeError(f"mypy failed without an error it could attribute:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return errors


def load_baseline(path: Path = BASELINE) -> Baseline:
    loaded = json.loads(path.read_text())
    return Baseline(strict=list(loaded["strict"]), errors=dict(loaded["errors"]))


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def problems(errors: list[Finding], baseline: Baseline) -> list[str]:
    """What the ratchet refuses, each with the errors of the module concerned: a module with more
    errors than its count, or any error in a strict package."""
    allowed, strict = baseline["errors"], baseline["strict"]
    by_module: dict[str, list[Finding]] = {}
    for error in errors:
        by_module.setdefault(error.module, []).append(error)
    out = []
    for module, found in sorted(by_module.items()):
        package = next((p for p in strict if in_package(module, p)), None)
        if package is not None:
            out.append(f"{module}: {len(found)} type errors in {package}, which must have none (strict):")
        elif len(found) > allowed.get(module, 0):
            out.append(f"{module}: {len(found)} type errors, {allowed.get(module, 0)} allowed by "
                       f"{BASELINE.relative_to(ROOT)}:")
        else:
            continue
        out.extend(f"    {error}" for error in found)
    return out


def updated(errors: list[Finding], baseline: Baseline) -> Baseline:
    """The baseline with today's counts; its strict packages as they were."""
    strict = baseline["strict"]
    refused = [e for e in errors if any(in_package(e.module, p) for p in strict)]
    if refused:
        raise SystemExit("type errors in strict packages are not counted, fix them:\n" + "\n".join(map(str, refused)))
    counts = Counter(error.module for error in errors)
    return Baseline(strict=strict, errors=dict(sorted(counts.items())))


def clean_packages(errors: list[Finding], strict: list[str]) -> list[str]:
    """The first-level packages and modules with no error that are not strict yet."""
    units = {".".join(p.with_suffix("").parts[:2 if p.parts[0] == "toolfactory" else 1])
             for root in ("toolfactory", "flows", "tasks") for p in (ROOT / root).rglob("*.py")
             for p in [p.relative_to(ROOT)]}
    units.discard("toolfactory.__init__")
    dirty = {unit for unit in units for error in errors if in_package(error.module, unit)}
    return sorted(unit for unit in units - dirty if unit not in strict)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mypy_ratchet", description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help=f"rewrite {BASELINE.relative_to(ROOT)} with today's counts")
    args = parser.parse_args(argv)
    errors = run_mypy()
    baseline = load_baseline()
    if args.update:
        new = updated(errors, baseline)
        BASELINE.write_text(json.dumps(new, indent=2) + "\n")
        print(f"{BASELINE.relative_to(ROOT)}: {len(errors)} errors in {len(new['errors'])} modules")
        ready = clean_packages(errors, new["strict"])
        if ready:
            print("clean, and could join `strict`:", ", ".join(ready))
        return 0
    found = problems(errors, baseline)
    print("\n".join(found) if found else f"mypy: {len(errors)} errors, none above the baseline")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
