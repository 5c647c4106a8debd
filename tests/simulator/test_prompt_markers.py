"""The simulator recognises the product's prompts by markers declared next to them
(toolfactory/stages/prompt_markers.py): each marker still occurs in its prompt, and each is one
the simulator uses, so a prompt reworded without its marker fails here rather than in a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolfactory.stages import prompt_markers

SIMULATOR = Path(__file__).resolve().parents[2] / "toolfactory" / "simulator"
MARKERS = {name: value for name, value in vars(prompt_markers).items() if name.isupper() and isinstance(value, str)}


@pytest.mark.parametrize("name", sorted(MARKERS))
def test_each_marker_occurs_in_the_prompt_it_recognises(name: str) -> None:
    marker = MARKERS[name]
    assert marker.lower() in prompt_markers.written_in(marker).lower(), (
        f"prompt_markers.{name} = {marker!r} no longer occurs in its prompt: change the marker with the prompt")


def test_every_marker_names_its_prompt_and_is_read_by_the_simulator() -> None:
    assert set(prompt_markers.WRITTEN_IN) == set(MARKERS.values())
    source = "\n".join(path.read_text() for path in SIMULATOR.glob("*.py"))
    assert [name for name in MARKERS if f"said.{name}" not in source] == []


def test_a_reworded_prompt_fails_its_marker(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolfactory.stages.tasks import toolace

    reworded = {**toolace.MODE_GUIDES, "parallel": "needs several independent calls"}
    monkeypatch.setattr(toolace, "MODE_GUIDES", reworded)
    assert prompt_markers.MODE_PARALLEL not in prompt_markers.written_in(prompt_markers.MODE_PARALLEL)
