"""Python environments the tests run: a small stateful class, and one that misbehaves."""

from __future__ import annotations

import os
import subprocess
import sys
import time


class Counter:
    """A named counter."""

    def __init__(self, start: int = 0, label: str = "counter") -> None:
        self.value = start
        self.label = label
        self.history: list[int] = []
        self._calls = 0

    def add(self, amount: int, note: str | None = None) -> dict[str, int]:
        """Add to the counter.

        Args:
            amount: How much to add.
            note: Why, for the record.

        Returns:
            The new value.
        """
        self.value += amount
        self.history.append(amount)
        return {"value": self.value}

    def divide(self, by: float) -> float:
        """Divide the counter's value."""
        return self.value / by

    def shout(self) -> str:
        """Print to stdout, then answer."""
        print("noise on stdout")
        return "done"


class Hostile(Counter):
    """A counter whose methods hang, crash, flood or fork."""

    def hang(self) -> None:
        """Never answers."""
        time.sleep(3600)

    def crash(self) -> None:
        """Exits mid-call."""
        os._exit(3)

    def flood(self) -> None:
        """Writes without end."""
        while True:
            sys.stdout.write("x" * 65536)

    def huge(self) -> str:
        """An answer far beyond any cap."""
        return "z" * 1_000_000

    def big(self) -> str:
        """A long answer."""
        return "y" * 5000

    def fork(self, n: int) -> str:
        """Tries to start `n` sleeping processes, then waits."""
        started = 0
        for _ in range(n):
            try:
                subprocess.Popen(["sleep", "3600"])
                started += 1
            except OSError:
                pass
        time.sleep(5)
        return str(started)


class Shelf:
    """Books on a shelf."""

    def __init__(self, books: list[str] | None = None) -> None:
        self.books = list(books or [])

    def put(self, title: str) -> list[str]:
        """Put a book on the shelf.

        Args:
            title: The book's title.
        """
        self.books.append(title)
        return self.books

    def count(self) -> int:
        """How many books are on the shelf."""
        return len(self.books)

    def lend(self, title: str) -> str:
        """Lend a book from the shelf.

        Args:
            title: The book's title.
        """
        if title not in self.books:
            raise LookupError(f"{title!r} is not on the shelf")
        self.books.remove(title)
        return title


class Probed:
    """Tools that work, need another's work first, need the network or a key, always fail, or
    answer differently each time: what vetting tells apart."""

    def __init__(self) -> None:
        self.notes: list[str] = []

    def broken(self, count: int) -> int:
        """Count something (it cannot)."""
        raise RuntimeError("this tool is not finished")

    def fetch(self, url: str) -> str:
        """Fetch a web page."""
        import urllib.request

        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()

    def forecast(self, city: str) -> dict[str, str]:
        """The weather of a city."""
        raise PermissionError("401 Unauthorized: set WEATHER_API_KEY")

    def read(self, index: int) -> str:
        """A saved note, by its number (from 1)."""
        return self.notes[index - 1]

    def roll(self) -> float:
        """A random number."""
        import random

        return random.random()

    def stall(self, seconds: int) -> str:
        """Wait, then answer (it waits for ever)."""
        import time as clock

        clock.sleep(3600)
        return "done"

    def save(self, text: str) -> dict[str, int]:
        """Save a note; its number."""
        self.notes.append(text)
        return {"saved": len(self.notes)}


_NOTES: list[str] = []  # kept by the module, not the instance: a new instance still sees it


class Leaky:
    """Notes kept at module level: making the instance anew does not forget them."""

    def note(self, text: str) -> int:
        """Keep a note; the number of notes kept."""
        _NOTES.append(text)
        return len(_NOTES)

    def notes(self) -> list[str]:
        """Every note kept."""
        return list(_NOTES)


class Stamped:
    """Notes with the time they were saved: two sessions that save the same note differ."""

    def __init__(self) -> None:
        self.saved: list[list[object]] = []

    def save(self, text: str) -> int:
        """Save a note; the number saved."""
        self.saved.append([text, time.time_ns()])
        return len(self.saved)
