"""toolfactory: synthesize and verify tool-use (function-calling) training data for LLMs.

The library behind the flows: configuration, records, the LLM gateway, the stages and the
stats database. It imports neither Prefect nor Ray; the flows in ``flows/`` and the task in
``tasks/`` are thin adapters over it.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolfactory.config import Config, load_config

from toolfactory.errors import ConfigError, LLMFailure, TerminalError, ToolfactoryError, TransientError
from toolfactory.models import Dialogue, Function, Message, Rejected, Task, Tool, ToolCall, Verdict

try:
    __version__ = version("toolfactory")
except PackageNotFoundError:  # pragma: no cover - running from a source tree
    __version__ = "0.0.0"

__all__ = [
    "Config",
    "ConfigError",
    "Dialogue",
    "Function",
    "LLMFailure",
    "Message",
    "Rejected",
    "Task",
    "TerminalError",
    "Tool",
    "ToolCall",
    "ToolfactoryError",
    "TransientError",
    "Verdict",
    "load_config",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # The configuration is imported when first asked for: it loads every section and
    # an HTTP client, which `toolfactory verify` never uses (seconds of start-up).
    if name in ("Config", "load_config"):
        from toolfactory import config

        return getattr(config, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
