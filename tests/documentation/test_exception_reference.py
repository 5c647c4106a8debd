"""The exception reference draws the tree under ToolfactoryError and lists every class with its
bases, module and docstring; a class outside the tree is named there and fails the suite."""

from __future__ import annotations

from pathlib import Path

from .helpers import ROOT, generator


def test_the_page_draws_and_lists_every_exception_of_the_tree():
    reference = generator("exception_reference")
    found = reference.exception_classes()
    page = reference.page()
    assert {"toolfactory.errors.ToolfactoryError", "toolfactory.errors.LLMFailure", "toolfactory.render.errors.RenderError",
            "toolfactory.simulator.errors.SimulatorError", "toolfactory.run.stats_sync.Unreadable"} <= set(found)
    drawing = page.split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    assert drawing[0] == "ToolfactoryError" and "├── ConfigError" in drawing and "│   ├── PreflightFailed" in drawing
    assert len(drawing) == len(found)
    rows = [line for line in page.splitlines() if line.startswith("| ") and "`" in line.split("|")[1]]
    missing = [exc.path for exc in found.values() if not any(f"`{exc.name}` |" in row and f"`{exc.module}`" in row for row in rows)]
    assert missing == []


def test_every_exception_is_under_toolfactory_error():
    reference = generator("exception_reference")
    assert reference.outside_the_tree(reference.exception_classes()) == []


def test_a_class_outside_the_tree_is_found_through_its_bases(tmp_path: Path):
    package = tmp_path / "sample"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "base.py").write_text("class Refused(ValueError):\n    '''A builtin's subclass.'''\n")
    (package / "mod.py").write_text(
        "from sample.base import Refused\n"
        "from toolfactory.errors import TerminalError\n"
        "class Deeper(Refused):\n    pass\n"
        "class Kept(TerminalError, KeyError):\n    '''Inside the tree.'''\n"
        "class Plain:\n    pass\n"
    )
    reference = generator("exception_reference")
    found = reference.exception_classes(("toolfactory", "sample"), (tmp_path, ROOT))
    assert "sample.mod.Plain" not in found
    assert found["sample.mod.Kept"].bases == ["toolfactory.errors.TerminalError", "KeyError"]
    assert reference.outside_the_tree(found) == ["sample.base.Refused", "sample.mod.Deeper"]
    assert "Outside the tree (to be moved under `ToolfactoryError`): `sample.base.Refused`, `sample.mod.Deeper`." \
        in reference.page(found)
