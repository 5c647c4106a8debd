"""A Python environment that answers its failures as text rather than raise (``Error: …``,
``Ledger error: …``), beside tools whose correct answers look like labels or error fields."""

from __future__ import annotations

import json


class Ledger:
    """Accounts and their balances."""

    def __init__(self) -> None:
        self.accounts: dict[str, int] = {"alice": 10}

    def deposit(self, account: str, amount: int) -> str:
        """Add to an account's balance.

        Args:
            account: The account's name.
            amount: How much to add.
        """
        if not isinstance(amount, int) or isinstance(amount, bool):
            return "Error: amount must be a whole number"
        if account not in self.accounts:
            return f"Ledger error: no account {account!r}"
        self.accounts[account] += amount
        return f"{account} now holds {self.accounts[account]}"

    def overview(self) -> list[str]:
        """The names of the accounts (listed after the tools that need one)."""
        return sorted(self.accounts)

    def echo(self, text: str) -> str:
        """Say a text back.

        Args:
            text: What to say.
        """
        return "Echo: " + text

    def check(self, document: str) -> dict[str, object]:
        """Whether a text is valid JSON.

        Args:
            document: The text to check.
        """
        try:
            json.loads(document)
        except ValueError as exc:
            return {"valid": False, "error": str(exc)}
        return {"valid": True}
