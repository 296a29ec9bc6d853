"""The one application error base (HackSoft's ``ApplicationError``).

Services raise its subclasses; the DRF exception handler (``console.http``) turns each into
``{"detail", "errors", **extra()}`` with its ``status_code``, and pages re-render with
``message`` and ``errors``. Views do not catch each subclass.
"""

from __future__ import annotations

from typing import Any


class ApplicationError(Exception):
    """A refusal a person can act on: a message, the fields at fault, an HTTP status."""

    status_code = 400

    def __init__(self, message: str, *, errors: dict[str, str] | None = None):
        super().__init__(message)
        self.message = message
        self.errors: dict[str, str] = errors or {}

    def extra(self) -> dict[str, Any]:
        """More fields of the API's error body (beside ``detail`` and ``errors``)."""
        return {}
