"""The effects ledger: every side effect runs exactly once per idempotency key (invariant 1).

``effect_execute`` claims the key with one insert on the unique constraint, calls the downstream
outside any transaction (invariant 9) with the same key, then records the result. A retry, a
replay or a second worker finds the row and returns its result or finishes the call (deduped)."""

from __future__ import annotations

import logging
import random
import time
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from agents.effects.authorize import approval_authorize, approval_read
from agents.effects.calls import as_stored_json as _json
from agents.effects.calls import call_with_timeout
from agents.effects.claim import effect_insert_fenced
from agents.effects.errors import (
    AdvanceDeadline,
    EffectConflict,
    EffectInDoubt,
    LeaseNotHeld,
    RunCancelled,
    ToolError,
    call_cut_off,
    call_timeouts,
    call_transient_errors,
)
from agents.effects.fence import fence, fence_check, refusal_audited
from agents.effects.reconcile import UNSETTLED, effect_escalate, effect_reconcile
from agents.effects.rows import effect_fields_seal, effect_mark
from agents.effects.timing import already_done, deferred_before, run_config_value, short_of_time
from agents.effects.tracing import tool_call_done, tool_call_span
from agents.effects.undone import action_undone_check
from agents.models import Effect, Settlement
from agents.tools import tool_get
from audit.canonical import payload_hash
from audit.services import event_record

logger = logging.getLogger(__name__)

# Backoff between attempts: RETRY_BASE_DELAY_S * 2**n, plus up to 50 % jitter, capped.
# Tests patch the base to keep retries fast.
RETRY_BASE_DELAY_S = 0.5
RETRY_MAX_DELAY_S = 30.0
ACTOR = "system:ledger"


def effect_execute(
    *,
    run_id: str,
    key: str,
    tool: str,
    args: dict[str, Any],
    approval_id: int | None = None,
    approved_args: dict[str, Any] | None = None,
    action_key: str | None = None,
) -> dict[str, Any]:
    """Run ``tool`` with ``args`` once for ``key`` and return its (stored) result.

    With ``approval_id``, the approval must belong to ``run_id``, must not have authorized
    another action, and its final args must equal ``approved_args`` (default ``args``). A saga
    step passes the args and the key of the call that was approved (``action_key``, default
    ``key``): its steps' keys all spend that one approval.
    """
    return _execute(
        run_id=run_id,
        key=key,
        tool=tool,
        args=args,
        approval_id=approval_id,
        approved_args=args if approved_args is None else approved_args,
        compensates=None,
        action_key=action_key or key,
    )


def effect_get(*, key: str) -> Effect | None:
    return Effect.objects.filter(key=key).first()


# --- internals ---------------------------------------------------------------------------------


def _execute(*, run_id: str, key: str, tool: str, compensates: Effect | None, **kw: Any) -> Any:
    """One ledger call (``_call``) in its ``tool.call`` span (effects.tracing)."""
    with tool_call_span(tool=tool, key=key, run_id=run_id, compensating=compensates is not None):
        return _call(run_id=run_id, key=key, tool=tool, compensates=compensates, **kw)


@refusal_audited  # a refusal is audited once the call (and its claim's transaction) is over
def _call(
    *,
    run_id: str,
    key: str,
    tool: str,
    args: dict[str, Any],
    approval_id: int | None,
    approved_args: dict[str, Any],
    compensates: Effect | None,
    action_key: str | None = None,
) -> dict[str, Any]:
    spec = tool_get(tool)
    args = _json(args)
    fingerprint = payload_hash(args)
    compensating = compensates is not None
    # Cancel and lease before an approval is spent (invariants 6 and 14), read with the approval's
    # row. Without an approval nothing is written before the claim, fenced in its own INSERT.
    approval = approval_read(approval_id) if approval_id is not None else None
    if approval is not None and str(approval.run_id) == str(run_id):
        fence_check(
            run_id,
            compensating=compensating,
            owner=_lease_owner(),
            cancel_requested=approval.fence_cancel_requested,
            lease_owner=approval.fence_lease_owner,
            lease_expires_at=approval.fence_lease_expires_at,
        )
    elif approval is not None:
        _fence(run_id, compensating=compensating)
    if approval_id is not None:
        approval_authorize(
            approval_id=approval_id,
            run_id=run_id,
            key=key,
            action_key=action_key or key,
            approved_args=_json(approved_args),
            approval=approval,
        )
    if short_of_time() and not already_done(key) and not deferred_before(run_id, key):
        # Started now, the call could not have its full timeout before the advance's deadline:
        # nothing is claimed, the run continues in a new task and the call starts there.
        raise AdvanceDeadline(f"{tool} under {key} starts in the next task", key=key)

    effect, fresh = _claim(
        run_id=run_id,
        key=key,
        tool=tool,
        args=args,
        fingerprint=fingerprint,
        approval_id=approval_id,
        compensates=compensates,
        compensating=compensating,
        action_key=action_key or key,
    )
    if effect.status in (Effect.Status.SUCCEEDED, Effect.Status.COMPENSATED):
        tool_call_done("replayed")
        return effect.result
    if not fresh and effect.status in UNSETTLED:
        # An earlier attempt may have reached the downstream: ask it by key first.
        outcome = effect_reconcile(effect, spec)
        if outcome == "succeeded":
            tool_call_done("reconciled")
            return effect.result
        if outcome != "not_done" and not spec.takes_key:
            # Calling again could do it twice, and the downstream cannot dedupe: a person says.
            effect_escalate(effect, reason="a tool without idempotency key may have acted")
            raise EffectInDoubt(
                f"{tool} under {key} may have acted and cannot be asked or deduped: "
                "a person must settle it"
            )
        effect = _reclaim(effect)
    if not fresh:
        # Before calling again under an earlier attempt's key (a fresh claim was fenced itself).
        _fence(run_id, compensating=compensating)
    attempts = 0
    # A tool that cannot take the key is called at most once: no retry could be deduped.
    max_attempts = settings.TOOL_MAX_RETRIES + 1 if spec.takes_key else 1
    deadline = run_config_value("deadline")
    while True:
        attempts += 1
        if attempts > 1:
            _fence_retry(effect, run_id, compensating=compensating, tried=attempts - 1, args=args)
        timeout = settings.TOOL_TIMEOUT_SECONDS
        if deadline is not None:
            # No call waits past the advance's deadline (below the task timeout), and no retry
            # starts after it: the run continues in a new task and the key keeps it single.
            timeout = min(timeout, deadline - time.time())
            if timeout <= 0.05:
                max_attempts = attempts  # this is the last attempt
                timeout = 0.05
        try:
            result = call_with_timeout(spec.run, args, key, timeout)
        except Exception as exc:
            doubt = isinstance(exc, call_timeouts()) or (
                isinstance(exc, call_cut_off()) and not isinstance(exc, call_transient_errors())
            )
            transient = doubt or isinstance(exc, call_transient_errors())
            if not transient or attempts >= max_attempts:
                if doubt or (transient and not spec.takes_key):
                    # No answer, a cut-off connection, or a keyless downstream's 5xx: it may
                    # have acted. Unknown, not failed (invariant 13).
                    _in_doubt(effect, exc, attempts=attempts, args=args)
                else:  # a 4xx, a bug in the tool, or trouble before it reached the downstream
                    _fail(effect, exc, attempts=attempts, args=args)
                raise
            delay = _backoff_delay(attempts)
            # The exception's type only: its message may quote the run's data (never logged).
            logger.warning(
                "effect %s: %s; retry %d in %.2fs", key, type(exc).__name__, attempts, delay
            )
            time.sleep(delay)
        else:
            return _succeed(effect, _json(result), attempts=attempts, args=args)


def _fence_retry(
    effect: Effect, run_id: str, *, compensating: bool, tried: int, args: dict[str, Any]
) -> None:
    """Before another attempt: a cancel or a lost lease stops it, the effect left in doubt."""
    try:
        _fence(run_id, compensating=compensating)
    except (RunCancelled, LeaseNotHeld) as exc:
        _in_doubt(effect, exc, attempts=tried, args=args)
        raise


def _lease_owner() -> str | None:
    return run_config_value("lease_owner")


def _fence(run_id: str, *, compensating: bool) -> None:
    fence(run_id, compensating=compensating, owner=_lease_owner())


def _claim(
    *,
    run_id: str,
    key: str,
    tool: str,
    args: dict[str, Any],
    fingerprint: str,
    approval_id: int | None,
    compensates: Effect | None,
    compensating: bool,
    action_key: str,
) -> tuple[Effect, bool]:
    """(row, fresh): insert the claim (fenced: ``effect_insert_fenced``; none for an action
    undone before it ran), or load the existing row for this key and check it is the same call."""
    try:
        with transaction.atomic(durable=True):
            approved = approval_id is not None or compensating
            action_undone_check(key=key, action=action_key, run_id=run_id, approved=approved)
            effect = Effect(
                key=key,
                run_id=run_id,
                tool=tool,
                args=args,
                args_fingerprint=fingerprint,
                approval_id=approval_id,
                compensates=compensates,
                status=Effect.Status.CLAIMED,
            )
            now = timezone.now()
            owner = _lease_owner()
            if not effect_insert_fenced(effect, owner=owner, compensating=compensating, now=now):
                _fence(run_id, compensating=compensating)  # raises why, as it stands now
                raise LeaseNotHeld(f"worker {owner} lost the lease of run {run_id}")
            event_record(
                action="effect.claimed",
                actor=ACTOR,
                run_id=run_id,
                approval_id=approval_id,
                tool=tool,
                data={"key": key, "args_fingerprint": fingerprint},
                private={"args": args},
            )
            return effect, True
    except IntegrityError:
        pass
    _fence(run_id, compensating=compensating)  # before this attempt acts on the stored row
    effect = Effect.objects.get(key=key)
    if effect.tool != tool or effect.args_fingerprint != fingerprint:
        raise EffectConflict(
            f"key {key!r} was used for {effect.tool} with other args "
            f"(fingerprint {effect.args_fingerprint[:12]}, now {fingerprint[:12]})"
        )
    if effect.status == Effect.Status.FAILED:
        undo = effect.compensates_id is not None
        if effect.settlement == Settlement.NOT_DONE and not undo:
            raise ToolError(
                f"{tool} was not called: {effect.settled_by} settled it as not done", status=409
            )
        # Same key again (the downstream dedupes). A person's "call it again" authorizes one more
        # call (settlement cleared), so does "it did not happen" for an undo (still owed).
        authorized = effect.settlement == Settlement.RETRY or (
            undo and effect.settlement == Settlement.NOT_DONE
        )
        with transaction.atomic(durable=True):
            reclaimed = Effect.objects.filter(pk=effect.pk, status=Effect.Status.FAILED).update(
                status=Effect.Status.CLAIMED,
                error="",
                settlement="",
                escalated_at=None,  # a person answered: it waits for nobody now
                updated_at=timezone.now(),
            )
            if reclaimed:
                event_record(
                    action="effect.claimed",
                    actor=ACTOR,
                    run_id=effect.run_id,
                    approval_id=effect.approval_id,
                    tool=tool,
                    data={"key": key, "args_fingerprint": fingerprint, "after_failure": True},
                )
        effect.refresh_from_db()
        return effect, authorized and bool(reclaimed)
    return effect, False


def _reclaim(effect: Effect) -> Effect:
    """Call again under the same key (the downstream dedupes on it): an unsettled effect the
    lookup did not find, or could not ask about. Audited like the first claim; it no longer
    waits for a person, and its quiet period starts again (a call is in flight)."""
    effect_mark(
        effect,
        where={"status__in": (*UNSETTLED, Effect.Status.FAILED)},
        update={"status": Effect.Status.CLAIMED, "error": "", "escalated_at": None},
        action="effect.claimed",
        actor=ACTOR,
        data={"args_fingerprint": effect.args_fingerprint, "again": True, "was": effect.status},
    )
    effect.refresh_from_db()
    return effect


def _succeed(
    effect: Effect, result: dict[str, Any], *, attempts: int, args: dict[str, Any]
) -> dict[str, Any]:
    if _finish(
        effect,
        status=Effect.Status.SUCCEEDED,
        fields={"result": result},
        attempts=attempts,
        data={"approval_id": effect.approval_id},
        private={"args": args, "result": result},
    ):
        return result  # what this call stored
    # Someone else finished the row first: theirs is the stored result.
    effect.refresh_from_db()
    return effect.result


def _in_doubt(effect: Effect, exc: BaseException, *, attempts: int, args: dict[str, Any]) -> None:
    _finish(
        effect,
        status=Effect.Status.IN_DOUBT,
        fields={"error": f"{type(exc).__name__}: {exc}"},
        attempts=attempts,
        data={},
        private={"args": args, "error": str(exc)},
    )


def _fail(effect: Effect, exc: BaseException, *, attempts: int, args: dict[str, Any]) -> None:
    error = f"{type(exc).__name__}: {exc}"
    _finish(
        effect,
        status=Effect.Status.FAILED,
        fields={"error": error},
        attempts=attempts,
        data={"retryable": isinstance(exc, call_transient_errors())},
        private={"args": args, "error": error},
    )


def _finish(
    effect: Effect, *, status: str, fields: dict[str, Any], attempts: int, data: dict, private: dict
) -> bool:
    """Move a claimed effect to its outcome and audit it, once (a conditional update; the
    event's ``private`` data sealed under the run's key). Returns whether this call moved it."""
    tool_call_done("error" if status == Effect.Status.FAILED else str(status), attempts=attempts)
    with transaction.atomic(durable=True):
        updated = Effect.objects.filter(pk=effect.pk, status=Effect.Status.CLAIMED).update(
            status=status,
            attempts=F("attempts") + attempts,
            updated_at=timezone.now(),
            **effect_fields_seal(effect, fields),
        )
        if updated:
            event_record(
                action=f"effect.{status}",
                actor=ACTOR,
                run_id=effect.run_id,
                approval_id=effect.approval_id,
                tool=effect.tool,
                data={"key": effect.key, "tool": effect.tool, **data, "attempts": attempts},
                private=private,
            )
    return bool(updated)


def _backoff_delay(attempt: int) -> float:
    base = RETRY_BASE_DELAY_S * (2 ** (attempt - 1))
    return min(RETRY_MAX_DELAY_S, base * (1 + random.random() * 0.5))
