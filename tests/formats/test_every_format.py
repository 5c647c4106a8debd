"""What every reader does alike, checked on every format `toolfactory verify --help` names (the
list it is built from, so a new format is covered here without a line more): a folder and each of
its files, a file that starts with UTF-8's byte-order mark, an integer longer than Python converts."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from toolfactory.cli import app
from toolfactory.formats import FORMATS, FormatError, named, read
from toolfactory.formats.base import BOM

from .samples import WRITERS

HUGE = "9" * 5000  # past Python's int-to-string limit (4300 digits)
NEEDS = {"bfcl_multi_turn": pytest.mark.skipif(importlib.util.find_spec("bfcl_eval") is None,
                                               reason="needs bfcl-eval (make test installs it)")}
EVERY_FORMAT = [pytest.param(fmt, marks=NEEDS.get(fmt, ())) for fmt in FORMATS]


def verify(path: Path, fmt: str, out: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["verify", str(path), "--format", fmt, "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    report: dict[str, Any] = json.loads((out / "report.json").read_text())
    return report


def test_the_help_names_every_format_and_a_sample_writes_each() -> None:
    option = next(p for p in typer.main.get_command(app).commands["verify"].params if p.name == "fmt")  # type: ignore[attr-defined]
    assert option.help == f"{named(FORMATS)}."
    assert list(WRITERS) == list(FORMATS)


@pytest.mark.parametrize("fmt", EVERY_FORMAT)
def test_a_folder_reads_as_its_files_together(fmt: str, tmp_path: Path) -> None:
    folder = tmp_path / "data"
    files = WRITERS[fmt](folder, ["3", "4"], "a") + WRITERS[fmt](folder, ["5"], "b")
    whole = verify(folder, fmt, tmp_path / "folder")
    assert (whole["records"], whole["accepted"]) == (3, 3), whole
    alone = [verify(file, fmt, tmp_path / f"file{n}") for n, file in enumerate(files)]
    assert [r["accepted"] for r in alone] == [r["records"] for r in alone] and sum(r["records"] for r in alone) == 3


@pytest.mark.parametrize("fmt", EVERY_FORMAT)
def test_a_file_that_starts_with_a_byte_order_mark_reads_as_without_it(fmt: str, tmp_path: Path) -> None:
    plain = WRITERS[fmt](tmp_path / "plain", ["3", "4"], "a")
    marked = WRITERS[fmt](tmp_path / "marked", ["3", "4"], "a")
    for file in (tmp_path / "marked").rglob("*"):  # the possible answers beside a BFCL file too
        if file.is_file():
            file.write_bytes(BOM + file.read_bytes())
    for without, with_mark in zip(plain, marked):
        items = list(read(with_mark, fmt))
        assert not [item for item in items if isinstance(item, FormatError)]
        assert items == list(read(without, fmt))


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize("fmt", EVERY_FORMAT)
def test_an_integer_longer_than_python_converts_makes_its_record_unreadable(fmt: str, workers: str, tmp_path: Path) -> None:
    """Whether the format keeps a call's arguments as text (openai) or as JSON the reader parses
    (xLAM's answers, ShareGPT's function_call, BFCL's call text), the record is reported alike."""
    files = WRITERS[fmt](tmp_path / "data", ["3", HUGE, "4"], "a")
    path = files[0] if len(files) == 1 else tmp_path / "data"
    report = verify(path, fmt, tmp_path / "r", "--workers", workers)
    assert (report["records"], report["accepted"], report["format_errors"], report["rules"]) == (3, 2, {"record_unreadable": 1}, {})
    (error,) = [json.loads(line) for line in (tmp_path / "r/format_errors.jsonl").read_text().splitlines()]
    assert error["index"] == 1
    assert error["message"].endswith("an integer of 5000 digits: longer than Python converts (4300 digits)"), error
