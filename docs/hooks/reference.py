"""MkDocs hook: the pages generated from the code, added to the site at every build.

The configuration reference (the pydantic models), the CLI reference (the Typer app), the
verifier's rule catalogue (the rule registry), the exception reference (the exception classes)
and the benchmarks page (``benchmarks/README.md``, which stays beside the benchmarks) are never
written by hand, so they cannot drift from the code.
They exist only in the build: nothing is written into ``docs/``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
# The site documents the checkout it is built from, whatever toolfactory the environment installed.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import cli_reference  # noqa: E402  (this folder is on sys.path while MkDocs loads the hook)
import config_reference  # noqa: E402
import exception_reference  # noqa: E402
import rule_catalogue  # noqa: E402


def benchmarks_page() -> str:
    return (ROOT / "benchmarks" / "README.md").read_text()


PAGES: dict[str, Callable[[], str]] = {
    "reference/configuration.md": config_reference.page,
    "reference/cli.md": cli_reference.page,
    "reference/rules.md": rule_catalogue.page,
    "reference/exceptions.md": exception_reference.page,
    "benchmarks.md": benchmarks_page,
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for uri, make in PAGES.items():
        files.append(File.generated(config, uri, content=make()))
    return files
