"""The ``tool.call`` span around each call through the effects ledger (a compensation too).

Attributes: tool, effect key, run, attempts made by this call and retries among them, and the
outcome: succeeded, replayed (the stored result of an earlier call under the key), reconciled
(the downstream, asked by key, had done it), in_doubt, error, or deferred (it starts in the next
task). Without a configured tracer provider this is OpenTelemetry's no-op span.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from agents.effects.errors import AdvanceDeadline, EffectInDoubt

_tracer = trace.get_tracer("agents.effects")


@dataclass
class _Call:
    outcome: str = ""
    attempts: int = 0


_current: ContextVar[_Call | None] = ContextVar("tool_call", default=None)


@contextmanager
def tool_call_span(*, tool: str, key: str, run_id: str, compensating: bool) -> Iterator[None]:
    """The span of one ledger call; the ledger reports its outcome with ``tool_call_done``."""
    with _tracer.start_as_current_span(
        "tool.call",
        attributes={
            "tool": tool,
            "effect.key": key,
            "run.id": str(run_id),
            "effect.compensation": compensating,
        },
        record_exception=False,
        set_status_on_exception=False,
    ) as span:
        call = _Call()
        token = _current.set(call)
        outcome = ""
        try:
            yield
            outcome = call.outcome or "succeeded"
        except BaseException as exc:
            outcome = call.outcome or _outcome_of(exc)
            if outcome in ("error", "in_doubt"):
                # The type only: an error's text can hold run data, and the collector is out
                # of erasure's reach (docs/operations.md).
                kind = type(exc)
                span.add_event(
                    "exception", {"exception.type": f"{kind.__module__}.{kind.__qualname__}"}
                )
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            _current.reset(token)
            span.set_attribute("tool.outcome", outcome)
            span.set_attribute("tool.attempts", call.attempts)
            span.set_attribute("tool.retries", max(0, call.attempts - 1))


def tool_call_done(outcome: str, *, attempts: int = 0) -> None:
    """What the current ledger call came to, and how many attempts it made."""
    call = _current.get()
    if call is not None:
        call.outcome, call.attempts = outcome, attempts


def _outcome_of(exc: BaseException) -> str:
    if isinstance(exc, AdvanceDeadline):
        return "deferred"
    if isinstance(exc, EffectInDoubt):
        return "in_doubt"
    return "error"
