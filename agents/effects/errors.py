"""What the ledger and the tools it calls raise. A leaf module: tools and sandboxes import it."""

from __future__ import annotations

import functools
import http.client
import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents.models import Effect


class ToolError(Exception):
    """A downstream call failed in a way that retrying will not fix (a 4xx)."""

    status: int = 400

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        if status is not None:
            self.status = status


class RetryableToolError(ToolError):
    """A downstream call failed transiently (429, 5xx, timeout): retry with the same key."""

    status = 503


class ToolTimeout(RetryableToolError):
    """The downstream did not answer within settings.TOOL_TIMEOUT_SECONDS."""

    status = 504


class LedgerError(Exception):
    """The ledger refuses to run this effect."""


class EffectConflict(LedgerError):
    """The key was already used for another tool or other args."""


class EffectArgsMismatch(LedgerError):
    """The args about to run differ from the args a person approved (invariant 5)."""


class RunCancelled(LedgerError):
    """The run was cancelled: no new effect of it starts (its compensations still run)."""


class EffectInDoubt(LedgerError):
    """The effect may have happened and the downstream cannot say (no lookup by key): a
    person settles it; it is never called again on its own (invariant 13)."""


class EffectApprovalMisuse(LedgerError):
    """The approval belongs to another run, or already authorized another effect key: an
    approval is spent once, by its own run (invariant 11)."""


class EffectTierRose(EffectArgsMismatch):
    """Under the policy in force now, the approved args need a higher tier than the approval
    was decided in; the gate asks again before this point, so this is the last line."""


class LeaseNotHeld(LedgerError):
    """This worker no longer holds the run's lease: another worker owns the run now, so this
    one must not call downstream (fencing for invariants 1 and 6)."""


class AdvanceDeadline(LedgerError):
    """Too little of this advance's time is left for the call to have its full timeout: the
    run continues in a new task, where it has (not a failure; nothing was called). Once per
    key: a call deferred before starts with whatever time is left."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class CompensationFailed(LedgerError):
    """Some effects could not be undone; the others were (see ``.compensated``)."""

    def __init__(self, message: str, *, compensated: list[Effect], failed: list[str]) -> None:
        super().__init__(message)
        self.compensated = compensated
        self.failed = failed


def _classes(*names: str) -> list[type[BaseException]]:
    """The exception classes named ``module:Class`` whose packages are installed (the HTTP
    clients are optional: a tool may use any of them, or none)."""
    found: list[type[BaseException]] = []
    for name in names:
        module, _, attr = name.partition(":")
        try:
            found.append(getattr(importlib.import_module(module), attr))
        except ImportError:  # pragma: no cover - that client is not installed
            continue
    return found


@functools.cache
def call_timeouts() -> tuple[type[BaseException], ...]:
    """Exceptions that mean "no answer in time" (the downstream may have acted): ours,
    Python's, and those of the common HTTP clients a tool may use."""
    return (
        ToolTimeout,
        TimeoutError,
        *_classes("requests:Timeout", "httpx:TimeoutException", "urllib3.exceptions:TimeoutError"),
    )


@functools.cache
def call_transient_errors() -> tuple[type[BaseException], ...]:
    """Transient trouble before the request reached the downstream (429/5xx answers, a refused
    connection): worth another try under the same key, and "failed" if the last try fails."""
    return (
        RetryableToolError,
        ConnectionRefusedError,
        *_classes("httpx:ConnectError", "urllib3.exceptions:NewConnectionError"),
    )


@functools.cache
def call_cut_off() -> tuple[type[BaseException], ...]:
    """A connection lost after the request may have been sent (reset, server disconnected, a
    protocol error mid-answer): like a timeout, the downstream may have acted."""
    return (
        ConnectionError,
        http.client.HTTPException,
        *_classes(
            "requests:ConnectionError",
            "httpx:NetworkError",
            "httpx:RemoteProtocolError",
            "urllib3.exceptions:ProtocolError",
        ),
    )


def call_may_have_acted() -> tuple[type[BaseException], ...]:
    """Timeouts and cut-off connections: the outcome is unknown (in doubt), retried by key."""
    return (*call_timeouts(), *call_cut_off())
