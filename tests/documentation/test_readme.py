"""The README stays an entry page a newcomer reads in minutes, and what it shows works."""

from __future__ import annotations

import re

import yaml

from .helpers import ROOT
from toolfactory.config import validate_config

README = ROOT / "README.md"
MAX_LINES = 250


def test_the_readme_is_short():
    assert len(README.read_text().splitlines()) <= MAX_LINES


def test_the_readme_gives_the_two_commands_and_the_simulator_warning():
    text = README.read_text()
    assert "make demo" in text and "make test" in text
    assert "The simulator's output is not real training data." in text


def test_the_readme_links_to_files_that_exist():
    # The reference pages exist only in the built site: the README cannot link to them as files.
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text())
    local = [link for link in links if "://" not in link]
    assert local and [link for link in local if not (ROOT / link).exists()] == []


def test_every_yaml_example_in_the_docs_is_a_valid_config():
    pages = [README, *sorted((ROOT / "docs").rglob("*.md"))]
    blocks = [(page.name, block) for page in pages for block in re.findall(r"```yaml\n(.*?)```", page.read_text(), re.S)]
    assert blocks
    for _name, block in blocks:
        validate_config(yaml.safe_load(block))  # raises ConfigError naming the bad field
