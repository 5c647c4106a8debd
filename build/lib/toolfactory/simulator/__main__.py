"""`python -m toolfactory.simulator serve ...` (see :mod:`.cli`)."""

from __future__ import annotations

from .cli import main

if __name__ == "__main__":
    main()
