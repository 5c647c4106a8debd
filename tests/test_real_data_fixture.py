"""The released-data fixture: skipped with its reason where the data is absent, failed under CI,
and pointed elsewhere by TOOLFACTORY_REAL_DATA."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")
PROBE = "def test_reads(shared_data):\n    assert (shared_data / 'toolalpaca').is_dir()\n"
PARTS = ("toolbench/answer", "toolbench/instruction", "toolbench/response_examples", "toolalpaca")


def _pytest(folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(CONFTEST, folder / "conftest.py")
    (folder / "test_probe.py").write_text(PROBE)
    clean = {k: v for k, v in os.environ.items() if k != "CI" and not k.startswith("TOOLFACTORY_")}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(folder)],
        cwd=folder, env={**clean, **env}, capture_output=True, text=True, timeout=120,
    )


def test_absent_data_skips_with_the_folder_and_the_variable(tmp_path: Path) -> None:
    result = _pytest(tmp_path, TOOLFACTORY_REAL_DATA=str(tmp_path / "nowhere"))
    assert result.returncode == 0, result.stdout
    assert "1 skipped" in result.stdout
    assert str(tmp_path / "nowhere") in result.stdout and "TOOLFACTORY_REAL_DATA" in result.stdout


def test_absent_data_fails_under_ci(tmp_path: Path) -> None:
    result = _pytest(tmp_path, TOOLFACTORY_REAL_DATA=str(tmp_path / "nowhere"), CI="true")
    assert result.returncode == 1
    assert "1 error" in result.stdout


@pytest.mark.parametrize("ci", ["", "true"])
def test_the_variable_names_the_folder(tmp_path: Path, ci: str) -> None:
    data = tmp_path / "releases"
    for part in PARTS:
        (data / part).mkdir(parents=True)
    result = _pytest(tmp_path, TOOLFACTORY_REAL_DATA=str(data), CI=ci)
    assert result.returncode == 0, result.stdout
    assert "1 passed" in result.stdout
