"""The client's errors: one base carrying the console's status and body, one class per status."""

from __future__ import annotations

from typing import Any


class ConsoleError(Exception):
    """The console answered with an error (``status``, parsed JSON ``body``), or not at all.

    ``status`` is ``None`` when no answer arrived (connection refused, timed out) after the
    client's retries.
    """

    def __init__(self, status: int | None, body: Any = None, message: str = "") -> None:
        self.status = status
        self.body = body
        super().__init__(message or _describe(status, body))


def _describe(status: int | None, body: Any) -> str:
    if status is None:
        return f"the console did not answer: {body}"
    if isinstance(body, dict) and body:
        # DRF's shape: {"detail": "..."} or {"field": ["message", ...]}.
        detail = body.get("detail")
        if isinstance(detail, str):
            return f"{status}: {detail}"
        return f"{status}: " + "; ".join(f"{key}: {value}" for key, value in body.items())
    return f"{status}: {body!r}"


class BadRequest(ConsoleError):
    """400: a field is missing or wrong; ``body`` names it."""


class Unauthorized(ConsoleError):
    """401: no key, an unknown or revoked key, or an inactive agent."""


class Forbidden(ConsoleError):
    """403: e.g. a tool this agent may not ask about, or a person's token on the agent API."""


class NotFound(ConsoleError):
    """404: no such request, or another agent's."""


class Conflict(ConsoleError):
    """409: the same thread + interrupt with another value, or a different outcome report."""


class ServerError(ConsoleError):
    """5xx, still failing after the client's retries."""


class ConsoleUnavailable(ConsoleError):
    """No answer at all (connection error or timeout), after the client's retries."""


class NotDecided(ValueError):
    """``resume_value`` of a request that is still pending, or was cancelled."""

    def __init__(self, status: str) -> None:
        self.status = status
        super().__init__(f"the approval request is {status}, not decided: nothing to resume with")


class WebhookVerificationError(ValueError):
    """A callback whose signature, timestamp or headers do not check out: answer it 400/401."""


BY_STATUS: dict[int, type[ConsoleError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
}


def error_for(status: int, body: Any) -> ConsoleError:
    """The exception for an error answer."""
    if status >= 500:
        return ServerError(status, body)
    return BY_STATUS.get(status, ConsoleError)(status, body)
