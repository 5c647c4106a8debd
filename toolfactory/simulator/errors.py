"""OpenAI-shaped errors, so clients raise the same exception types they would in production."""

from __future__ import annotations

from typing import Any

from toolfactory.errors import ToolfactoryError


def error_body(
    message: str,
    error_type: str = "invalid_request_error",
    code: str | None = None,
    param: str | None = None,
) -> dict[str, Any]:
    """The JSON body OpenAI sends with an error status."""
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


class SimulatorError(ToolfactoryError):
    """A request the simulator refuses; carries the HTTP status and OpenAI error fields."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        error_type: str = "invalid_request_error",
        code: str | None = None,
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_type = error_type
        self.code = code
        self.param = param

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.error_type, self.code, self.param)
