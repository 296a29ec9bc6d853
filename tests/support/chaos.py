"""What the chaos tests plan and what they check at the end, against the database the real
processes wrote: one downstream row per effect key, every effect under its own run's approval,
nothing left in doubt, and every effect a cancelled run applied undone exactly once."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections import Counter
from collections.abc import Iterable
from typing import Any

from django.db.models import Q
from django.utils import timezone

from agents.effects.reconcile import UNSETTLED
from agents.models import (
    Effect,
    SandboxDeploy,
    SandboxNotification,
    SandboxTicket,
    Settlement,
)
from agents.tools import tool_get
from approvals.models import AgentRun, ApprovalRequest
from audit.models import AuditEvent

TICKET, ROLLBACK, NOTIFY = "create_incident_ticket", "rollback_deploy", "notify_channel"
CLOSE, ROLL_FORWARD = "close_incident_ticket", "roll_forward_deploy"
ACTIONS = (TICKET, ROLLBACK)
SEED_PREFIX = "chaos-seed:"
APPLIED = (Effect.Status.SUCCEEDED, Effect.Status.COMPENSATED)


@dataclasses.dataclass
class Planned:
    """One run of the faults chaos test: what it is for and what it must end as."""

    role: str  # plain | timeout | cancel_waiting | cancel_running | fork | fork_child
    input: dict[str, str]
    action: str  # the tool the copilot will propose: TICKET or ROLLBACK
    faults: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    run_id: str = ""
    parent_id: str = ""
    # For a fork: where in the lists of refused and of allowed steps to fork from (drawn with
    # the plan, so the choice does not depend on the order things happen in).
    fork_at: tuple[float, float] = (0.0, 0.0)

    @property
    def service(self) -> str:
        return self.input["service"]

    @property
    def ends_as(self) -> str:
        return "cancelled" if self.role.startswith("cancel") else "completed"


# A late call lands this long after it started: well after the cancel's compensation asked the
# downstream by key and found nothing, so the effect went to a person (LOOK_AFTER_S later).
LATE_HANG_S = 10.0


def fault(tool: str, kind: str, times: int) -> dict[str, Any]:
    late = {"hang_s": LATE_HANG_S} if kind == "late" else {}
    return {"tool": tool, "kind": kind, "times": times, **late}


# (role, action, faults on its calls): a timeout after the downstream acted, one before it
# did, and one whose call lands late, retried inside the call (times=1) or left in doubt for
# the run's retry (times=2), on both kinds of action and on the notification; cancels while
# waiting and while an effect is in flight (whose compensation must then undo what the
# downstream did, once, or a person say it never happened); forks.
FAULT_ROLES: tuple[tuple[str, str, tuple[tuple[str, str, int], ...]], ...] = (
    ("plain", ROLLBACK, ()),
    ("plain", TICKET, ((NOTIFY, "before", 2),)),
    ("timeout", TICKET, (("action", "after", 1),)),
    ("timeout", ROLLBACK, (("action", "after", 2),)),
    ("timeout", TICKET, (("action", "before", 2),)),
    ("timeout", ROLLBACK, (("action", "before", 1), (NOTIFY, "after", 1))),
    ("timeout", TICKET, (("action", "late", 1),)),
    ("cancel_waiting", TICKET, ()),
    ("cancel_waiting", ROLLBACK, ()),
    ("cancel_running", TICKET, (("action", "after", 2),)),
    ("cancel_running", ROLLBACK, (("action", "after", 2),)),
    ("cancel_running", TICKET, (("action", "before", 2),)),
    ("cancel_running", ROLLBACK, (("action", "late", 2),)),
    ("fork", TICKET, ()),
    ("fork", TICKET, ()),
)


def fault_plan(rng: random.Random) -> list[Planned]:
    """The runs in start order (seeded): rollbacks need a fresh deploy at sev1/sev2; tickets
    come from sev3/sev4, with or without one."""
    roles = list(FAULT_ROLES)
    rng.shuffle(roles)
    plan: list[Planned] = []
    for i, (role, action, faults) in enumerate(roles):
        service = f"fault-{i:02d}"
        severity = rng.choice(("sev1", "sev2") if action == ROLLBACK else ("sev3", "sev4"))
        run_input = {"service": service, "signal": f"error rate {5 + i}%", "severity": severity}
        planned = Planned(role=role, input=run_input, action=action)
        planned.fork_at = (rng.random(), rng.random())
        for tool, kind, times in faults:
            on = action if tool == "action" else tool
            planned.faults.append({**fault(on, kind, times), "service": service})
        plan.append(planned)
    return plan


def deploys_seed(services: Iterable[str]) -> int:
    """A deploy of 2.1.0 (from 2.0.9) ten minutes ago for each service; returns the count."""
    for service in sorted(services):
        SandboxDeploy.objects.create(
            idempotency_key=f"{SEED_PREFIX}{service}",
            service=service,
            version="2.1.0",
            previous_version="2.0.9",
            deployed_at=timezone.now() - dt.timedelta(minutes=10),
        )
    return SandboxDeploy.objects.filter(idempotency_key__startswith=SEED_PREFIX).count()


def downstream_row(effect: Effect) -> Any:
    """The sandbox row written under the effect's key, or None: what a person would look up."""
    model = {
        TICKET: SandboxTicket,
        ROLLBACK: SandboxDeploy,
        ROLL_FORWARD: SandboxDeploy,
        NOTIFY: SandboxNotification,
    }.get(effect.tool)
    return model.objects.filter(idempotency_key=effect.key).first() if model else None


def call_cut_by_kill(planned: Planned, effect: Effect, *, killed_at: Iterable[dt.datetime]) -> bool:
    """A cancelled run's call that a kill cut before its fault was injected: nothing reached
    the downstream, and a kill of the worker landed while the effect was claimed and not yet
    settled (between its claim and its last write). Without such a kill a fault that was never
    injected is a broken plan or harness, not a cut call."""
    if planned.role != "cancel_running" or downstream_row(effect) is not None:
        return False
    return any(effect.created_at <= at <= effect.updated_at for at in killed_at)


def effects_unsettled() -> list[Effect]:
    return list(Effect.objects.filter(status__in=UNSETTLED).order_by("id"))


def cancelled_run_quiet(run: AgentRun) -> bool:
    """No advance holds the cancelled run, nothing of it is in doubt, nothing applied is left
    undone: its compensation is over."""
    if run.lease_owner:
        return False
    effects = run.effects.filter(compensates__isnull=True, tool__in=ACTIONS)
    return not effects.filter(status__in=(*UNSETTLED, Effect.Status.SUCCEEDED)).exists()


def assert_one_downstream_row_per_effect() -> None:
    """Every applied effect has exactly its one sandbox row under its key; nothing else does."""
    expected = {
        TICKET: SandboxTicket.objects.all(),
        ROLLBACK: SandboxDeploy.objects.filter(is_rollback=True),
        ROLL_FORWARD: SandboxDeploy.objects.filter(is_rollback=False).exclude(
            idempotency_key__startswith=SEED_PREFIX
        ),
        NOTIFY: SandboxNotification.objects.all(),
    }
    for tool, rows in expected.items():
        row_keys = Counter(rows.values_list("idempotency_key", flat=True))
        applied = Effect.objects.filter(tool=tool, status__in=APPLIED)
        effect_keys = Counter(applied.values_list("key", flat=True))
        assert row_keys == effect_keys, (tool, row_keys, effect_keys)
    for effect in Effect.objects.exclude(status__in=APPLIED):
        assert downstream_row(effect) is None, (effect, "not applied, yet the downstream has it")


def assert_every_effect_has_its_own_approval() -> None:
    """Each effect of a gated tool was approved in its own run, for exactly its args, and that
    approval authorized no other key (invariants 5 and 11)."""
    for effect in Effect.objects.filter(compensates__isnull=True).select_related("approval"):
        if tool_get(effect.tool).tier == "read":
            continue
        approval = effect.approval
        assert approval is not None, effect
        assert approval.run_id == effect.run_id, (effect, approval.run_id)
        assert approval.status == ApprovalRequest.Status.APPROVED, (effect, approval.status)
        assert approval.decision["args"] == effect.args, (effect, approval.decision)
        assert approval.spent_key == effect.key, (effect, approval.spent_key)


def assert_compensated_exactly_once(run: AgentRun) -> dict[str, str]:
    """Every action a cancelled run applied was undone by one compensation; what it never
    applied was settled as not done. Returns {effect key: what happened to it}."""
    seen: dict[str, str] = {}
    for effect in run.effects.filter(compensates__isnull=True, tool__in=ACTIONS):
        spec = tool_get(effect.tool)
        compensations = Effect.objects.filter(compensates=effect)
        events = AuditEvent.objects.filter(action="effect.compensated", run_id=run.pk)
        undone = [e for e in events if e.data.get("compensation_key") == f"{effect.key}:compensate"]
        if downstream_row(effect) is None:
            assert effect.status == Effect.Status.FAILED, effect
            assert effect.settlement == Settlement.NOT_DONE or not effect.escalated_at, effect
            assert not compensations.exists() and not undone, effect
            seen[effect.key] = f"never applied ({effect.settlement or 'reconciled'})"
            continue
        assert effect.status == Effect.Status.COMPENSATED, effect
        [compensation] = compensations
        assert compensation.key == f"{effect.key}:compensate", compensation
        assert compensation.tool == spec.compensate_with, compensation
        assert compensation.status == Effect.Status.SUCCEEDED, compensation
        assert len(undone) == 1, (effect, undone)
        if effect.tool == TICKET:
            assert downstream_row(effect).status == SandboxTicket.Status.CLOSED, effect
        else:
            assert downstream_row(compensation).version == effect.args["from_version"]
        seen[effect.key] = "applied, compensated once"
    return seen


def run_line(planned: Planned) -> str:
    """One line of evidence about a planned run: its state, effects and approvals now."""
    run = AgentRun.objects.filter(pk=planned.run_id).first()
    if run is None:
        return f"{planned.role} {planned.run_id or '(not started)'}"
    effects = ", ".join(
        f"{e.tool}:{e.status}{' escalated' if e.escalated_at else ''}" for e in run.effects.all()
    )
    approvals = ", ".join(f"#{a.pk} {a.tool}:{a.status}" for a in run.approvals.all())
    return (
        f"{planned.role:15} {planned.action:23} {run.pk} {run.status} flag={run.flag!r} "
        f"lease={run.lease_owner!r} faults={planned.faults} effects=[{effects}] "
        f"approvals=[{approvals}]"
    )


def runs_not_ended() -> list[AgentRun]:
    """Runs still running, queued or waiting, or flagged for a person."""
    ended = Q(status__in=AgentRun.TERMINAL) & Q(flag="")
    return list(AgentRun.objects.exclude(ended))


def assert_run_ended_as_planned(
    planned: Planned, view: dict[str, Any], *, acted: set[str], injected: dict[str, list[str]]
) -> str:
    """The run (as the API shows it) ended as its role says; returns what happened to it.
    ``acted``: the keys whose downstream acted in an ``after`` call; ``injected``: the faulted
    calls (tests/support/faults.py)."""
    tools = Counter(effect["tool"] for effect in view["effects"])
    if planned.ends_as == "completed":
        # Asked, approved, acted once, told the channel once.
        assert view["status"] == "completed", (planned, view)
        assert view["approvals"] and {a["status"] for a in view["approvals"]} == {"approved"}
        assert tools == Counter({planned.action: 1, NOTIFY: 1}), (planned, view)
        return "completed"
    assert view["status"] == "cancelled", (planned, view)
    if planned.role == "cancel_waiting":
        # Its approval closed by the cancel, nothing called.
        closed = [(a["status"], a["decided_by"]) for a in view["approvals"]]
        assert closed == [("expired", "system:cancel")], view
        assert tools == Counter(), view
        return "cancelled while waiting"
    # Cancelled with its action in flight: undone once if the downstream acted, else a person
    # said it never happened. The planned fault says which, unless a kill of the worker cut
    # the call: before its fault was injected (no call reached the downstream), or in an
    # ``after`` call between its marker and its note that the downstream acted (the sandbox
    # may or may not have committed; either ending is right, as assert_compensated_exactly_once
    # checked it against the downstream).
    outcome = assert_compensated_exactly_once(AgentRun.objects.get(pk=planned.run_id))
    [(key, ended)] = outcome.items()
    kind = next(f["kind"] for f in planned.faults if f["tool"] == planned.action)
    never, applied = "never applied (not_done)", "applied, compensated once"
    if key not in injected:
        wanted = {never}
    elif kind == "after" and key not in acted:
        wanted = {never, applied}
    else:
        wanted = {never if kind == "before" else applied}
    assert ended in wanted, (planned, outcome, sorted(wanted))
    assert NOTIFY not in tools, view
    return ended
