"""Everything else the process writes to the terminal, routed through the console of its live display.

A live display redraws its block by moving the cursor up over the lines it drew last. A line
written to the terminal behind its back (a log record from Prefect's console handler, a
`print`, a Ray worker's output forwarded by the driver) lands after the block, so the next
redraw starts in the wrong place: the old block stays behind as a stale copy and the log line
is glued to the end of a bar. Printed through the display's console instead, a line is placed
above the block and the block is drawn again below it (rich's `Live` does this for
`console.print`).

So, while a display is live, :class:`TerminalOutput` points every writer that reaches the same
terminal at a :class:`ConsoleStream`: `sys.stdout` and `sys.stderr`, each logging handler's
stream, and the rich console of handlers that print through one (Prefect's
`PrefectConsoleHandler`, rich's `RichHandler`). A writer on another file (a log file, stdout
redirected to a file while stderr is the terminal) is left alone. Everything is put back when
the display ends.
"""

from __future__ import annotations

import io
import logging
import os
import sys
import threading
from typing import IO, Any, Iterable

from rich.console import Console
from rich.text import Text


class ConsoleStream(io.TextIOBase):
    """A text stream whose whole lines are printed through `console` (ANSI colours kept); the
    file it stands for answers everything else (`fileno`, `isatty`, `encoding`)."""

    def __init__(self, console: Console, file: IO[str]) -> None:
        super().__init__()
        self._console = console
        self._file = file
        self._partial = ""
        self._lock = threading.Lock()  # several handlers and threads may write at once

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)

    def write(self, text: str) -> int:
        with self._lock:
            complete, newline, rest = (self._partial + text).rpartition("\n")
            self._partial = rest
        if newline:
            # soft_wrap: a long line is wrapped by the terminal, not broken into lines by rich.
            self._console.print(Text("\n").join(Text.from_ansi(line) for line in complete.split("\n")), soft_wrap=True)
        return len(text)

    def flush(self) -> None:
        """Partial lines wait for their end: printed now, they would be cut in two."""

    def close_partial(self) -> None:
        """Print a line left without its end (when the display ends)."""
        with self._lock:
            rest, self._partial = self._partial, ""
        if rest:
            self._console.print(Text.from_ansi(rest), soft_wrap=True)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self._file, "encoding", None) or "utf-8"

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        return self._file.isatty()

    def writable(self) -> bool:
        return True


def _same_file(stream: Any, terminal: os.stat_result, owned: Iterable[ConsoleStream]) -> bool:
    """Whether `stream` writes to the terminal `terminal` describes, other than through a stream
    in `owned` (a stream left by an earlier display writes to the terminal directly now)."""
    if stream is None or any(stream is mine for mine in owned):
        return False
    try:
        return bool(stream.isatty()) and os.path.samestat(os.fstat(stream.fileno()), terminal)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):  # closed, or no file behind it
        return False


def _handlers() -> list[logging.Handler]:
    """Every handler of every logger of the process (a handler shared by loggers once)."""
    loggers: list[logging.Logger] = [logging.getLogger()]
    loggers += [logger for logger in list(logging.Logger.manager.loggerDict.values()) if isinstance(logger, logging.Logger)]
    seen: dict[int, logging.Handler] = {}
    for logger in loggers:
        for handler in list(logger.handlers):
            seen.setdefault(id(handler), handler)
    return list(seen.values())


class TerminalOutput:
    """While entered, every writer of this process that reaches `console`'s terminal prints
    through `console` instead (see the module's docstring)."""

    def __init__(self, console: Console) -> None:
        self._console = console
        self._terminal = os.fstat(console.file.fileno())
        self._streams: dict[int, ConsoleStream] = {}  # one per file descriptor it stands for
        self._restore: list[tuple[object, str, Any]] = []  # (owner, attribute, original value)
        self._lock = threading.Lock()

    def __enter__(self) -> TerminalOutput:
        self.capture()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _stream(self, file: IO[str]) -> ConsoleStream:
        return self._streams.setdefault(file.fileno(), ConsoleStream(self._console, file))

    def _swap(self, owner: object, attribute: str, file: Any) -> None:
        self._restore.append((owner, attribute, file))
        setattr(owner, attribute, self._stream(file))

    def capture(self) -> None:
        """Route the writers that reach the terminal now; those created since the last call
        too (a library configures its logging when it is imported)."""
        with self._lock:
            for name in ("stdout", "stderr"):
                if _same_file(getattr(sys, name), self._terminal, self._streams.values()):
                    self._swap(sys, name, getattr(sys, name))
            for handler in _handlers():
                console = getattr(handler, "console", None)
                if isinstance(console, Console) and _same_file(console.file, self._terminal, self._streams.values()):
                    self._swap(console, "file", console.file)
                stream = getattr(handler, "stream", None)
                if isinstance(handler, logging.StreamHandler) and _same_file(stream, self._terminal, self._streams.values()):
                    self._restore.append((handler, "stream", stream))
                    handler.setStream(self._stream(stream))

    def release(self) -> None:
        """Put every writer back on its file, printing what was left without its line end."""
        with self._lock:
            for owner, attribute, original in reversed(self._restore):
                if isinstance(owner, logging.StreamHandler) and attribute == "stream":
                    owner.setStream(original)
                else:
                    setattr(owner, attribute, original)
            self._restore.clear()
            for stream in self._streams.values():
                stream.close_partial()
            self._streams.clear()
