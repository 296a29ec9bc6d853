"""Why the remote approval service refused a call (core.errors.ApplicationError: a status)."""

from __future__ import annotations

from core.errors import ApplicationError


class RemoteError(ApplicationError):
    """A refused remote call (400 unless a subclass says otherwise)."""


class RemoteRequestInvalid(RemoteError):
    """Input the console cannot use (400); ``errors`` names the field."""


class RemoteToolForbidden(RemoteError):
    """The agent is not registered for this tool (403)."""

    status_code = 403


class RemoteRequestConflict(RemoteError):
    """Same (thread, interrupt) with another value, or a run that can take no request (409)."""

    status_code = 409


class RemoteThreadNotFound(RemoteError):
    """No run of this thread for this agent (404)."""

    status_code = 404
