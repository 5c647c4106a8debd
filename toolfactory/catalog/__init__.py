"""The seed tool catalog shipped with toolfactory (the pipeline's default input).

``seed_tools.yaml`` holds 36 hand-written tools in 12 categories; see the file header for the
conventions it follows. ``introductions.yaml`` holds brief API introductions, the input of
documentation generation. Importers for other tool sources live elsewhere in the package.
"""

from __future__ import annotations

import pathlib
from importlib import resources

from toolfactory import fast_yaml
from toolfactory.models import Tool

SEED_CATALOG_FILE = "seed_tools.yaml"
INTRODUCTIONS_FILE = "introductions.yaml"


def seed_catalog_path() -> pathlib.Path:
    """Path of the shipped ``seed_tools.yaml``."""
    resource = resources.files(__package__).joinpath(SEED_CATALOG_FILE)
    return pathlib.Path(str(resource))


def introductions_path() -> pathlib.Path:
    """Path of the shipped ``introductions.yaml``: brief API introductions to document."""
    return pathlib.Path(str(resources.files(__package__).joinpath(INTRODUCTIONS_FILE)))


def load_seed_catalog() -> list[Tool]:
    """The seed catalog as validated :class:`~toolfactory.models.Tool` objects."""
    data = fast_yaml.load_file(seed_catalog_path())
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list):
        raise ValueError(f"{SEED_CATALOG_FILE}: expected a mapping with a 'tools' list")
    return [Tool.model_validate(entry) for entry in data["tools"]]


__all__ = ["INTRODUCTIONS_FILE", "SEED_CATALOG_FILE", "introductions_path", "load_seed_catalog", "seed_catalog_path"]
