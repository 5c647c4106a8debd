"""The documentation site builds with MkDocs in strict mode: a warning (a broken link or anchor, a
page left out of the navigation) fails the suite."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from .helpers import ROOT

GENERATED = ("reference/configuration.html", "reference/cli.html", "reference/rules.html", "reference/exceptions.html",
             "benchmarks.html")


def _build(project: Path, site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=project, env=env, capture_output=True, text=True, timeout=300)


def test_the_site_builds_strictly_with_its_generated_pages(tmp_path: Path):
    done = _build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    assert [p for p in GENERATED if not (tmp_path / "site" / p).is_file()] == []


def test_a_page_left_out_of_the_navigation_fails_the_build(tmp_path: Path):
    # The pages others add must be put in mkdocs.yml's nav, or the suite says so.
    project = tmp_path / "project"
    shutil.copytree(ROOT / "docs", project / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    shutil.copytree(ROOT / "benchmarks", project / "benchmarks", ignore=shutil.ignore_patterns("__pycache__", "results"))
    (project / "docs" / "orphan.md").write_text("# A page nobody links to\n")
    done = _build(project, tmp_path / "site")
    assert done.returncode != 0 and "orphan.md" in done.stderr, done.stderr[-3000:]
