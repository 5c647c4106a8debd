"""What every section of the configuration shares."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True)


def proportions(value: dict[str, float]) -> dict[str, float]:
    if not value or sum(value.values()) <= 0 or any(v < 0 for v in value.values()):
        raise ValueError("proportions must be >= 0 with a positive sum")
    return value
