"""The report in a real headless browser (Debian's `chromium`): it loads without a console or
network error, every chart image loads, and a screenshot is taken. `make test` installs
Chromium when it can (root and apt-get); elsewhere the test skips, unless `CI` is set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .browser import find_chromium, visit
from .conftest import Built

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def chromium() -> str:
    found = find_chromium()
    if found is None:
        reason = "chromium is not installed (`make test` installs it with apt-get when run as root)"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def test_the_report_renders_without_errors_and_with_every_chart(chromium: str, built: Built, tmp_path: Path) -> None:
    result = visit(chromium, Path(built.result["uri"]))
    assert result.errors == []
    assert result.images_loaded
    assert result.screenshot.startswith(PNG) and len(result.screenshot) > 20_000
    (tmp_path / "report.png").write_bytes(result.screenshot)


def test_the_browser_check_sees_a_broken_image(chromium: str, tmp_path: Path) -> None:
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><body><img src="missing.png" alt="x"></body></html>')
    result = visit(chromium, page)
    assert result.errors and not result.images_loaded
