"""A canary cannot reach a sandbox or a real tool, whatever a reviewer decides: the ledger
refuses any effect of its run (the fenced INSERT, audited "effect.refused"), and the advance
never invokes a graph for it (docs/autonomy.md)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.apps import apps
from django.utils import timezone

from agents import tasks
from agents.effects.canary import CanaryRunRefused
from agents.effects.claim import effect_insert_fenced
from agents.effects.ledger import effect_execute
from agents.models import Effect, SandboxRecord
from agents.runtime import advance
from approvals.models import AgentRun, ApprovalRequest, Canary, RiskTier
from approvals.services import approvals_sweep
from audit.models import AuditEvent
from tests.approvals.canary_support import plant, policy_seeded
from tests.support.approvals import decide

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]


@pytest.fixture
def demo_policy(alice, bob, carol, dave) -> dict:
    return policy_seeded({"bob": bob, "carol": carol})


def _sandbox_rows() -> int:
    models = [m for m in apps.get_models() if issubclass(m, SandboxRecord)]
    assert models  # the sandboxes exist: a count of zero means something
    return sum(model.objects.count() for model in models)


@pytest.fixture
def graph_calls(monkeypatch) -> list[Any]:
    """Every graph the advance would build (none may be, for a canary)."""
    calls: list[Any] = []

    def recorded(spec):
        calls.append(spec)
        raise AssertionError(f"the advance built the graph of {spec.name} for a canary")

    monkeypatch.setattr(advance, "graph_for", recorded)
    return calls


def _try_every_effect(canary: Canary) -> None:
    """What a worker could try for the canary's run: its approved call under the approval, the
    same without it, and another tool; each is refused."""
    approval = ApprovalRequest.objects.get(pk=canary.approval_id)
    run = AgentRun.objects.get(pk=canary.run_id)
    args = (approval.decision or {}).get("args") or approval.args
    attempts = [
        {"tool": approval.tool, "args": args, "approval_id": approval.pk},
        {"tool": approval.tool, "args": args},
        {"tool": "notify_channel", "args": {"channel": "incidents", "message": "hello"}},
    ]
    for number, attempt in enumerate(attempts):
        with pytest.raises(CanaryRunRefused, match="canary"):
            effect_execute(run_id=str(run.pk), key=f"{run.thread_id}:call-{number}", **attempt)


def _assert_inert(canary: Canary, graph_calls: list[Any]) -> None:
    assert tasks.run_advance(str(canary.run_id)).startswith("skipped: canary")
    _try_every_effect(canary)
    assert graph_calls == []
    assert Effect.objects.filter(run_id=canary.run_id).count() == 0
    assert _sandbox_rows() == 0
    refused = AuditEvent.objects.filter(action="effect.refused", run_id=canary.run_id)
    assert refused.count() == 3
    assert {e.data["reason"] for e in refused} == {"canary run"}
    assert not AuditEvent.objects.filter(action="effect.claimed").exists()
    run = AgentRun.objects.get(pk=canary.run_id)
    assert run.status == AgentRun.Status.COMPLETED
    assert run.output == {}  # nothing on the run says it was a canary
    assert run.wake_requested is False  # recovery will not queue it again


@pytest.mark.parametrize(
    ("decision", "extra", "outcome"),
    [
        ("approve", {}, "missed"),
        ("edit", {"args_change": {"amount": "10.00"}}, "missed"),
        ("reject", {"message": "amount is twice the order"}, "caught"),
        ("respond", {"message": "check the order total"}, "caught"),
    ],
)
def test_a_canary_runs_nothing_whatever_the_reviewer_decides(
    demo_policy, bob, graph_calls, decision, extra, outcome
):
    canary = plant("refund_doubled_amount")
    kwargs = dict(extra)
    change = kwargs.pop("args_change", None)
    if change:
        approval = ApprovalRequest.objects.get(pk=canary.approval_id)
        kwargs["args"] = {**approval.args, **change}
    decide(ApprovalRequest.objects.get(pk=canary.approval_id), bob, decision, **kwargs)
    canary.refresh_from_db()
    assert (canary.outcome, canary.decided_by) == (outcome, bob)
    _assert_inert(canary, graph_calls)


def test_a_canary_that_expires_into_approve_runs_nothing(demo_policy, graph_calls):
    RiskTier.objects.filter(name="write").update(expiry_decision="approve")
    canary = plant("refund_unknown_account")
    later = timezone.now() + dt.timedelta(days=1)
    assert approvals_sweep(now=later)["expired"] == 1
    approval = ApprovalRequest.objects.get(pk=canary.approval_id)
    assert approval.status == ApprovalRequest.Status.APPROVED  # the default was applied
    canary.refresh_from_db()
    assert (canary.outcome, canary.decided_by) == ("expired", None)
    _assert_inert(canary, graph_calls)


def test_a_critical_canary_rollback_runs_nothing_after_its_quorum(demo_policy, carol, graph_calls):
    from tests.support.people import person

    canary = plant("rollback_wrong_service", tier="critical")
    second = person("ivan", groups=[demo_policy["approvers-critical"]])
    decide(ApprovalRequest.objects.get(pk=canary.approval_id), carol, "approve")
    decide(ApprovalRequest.objects.get(pk=canary.approval_id), second, "approve")
    canary.refresh_from_db()
    assert canary.outcome == "missed"
    _assert_inert(canary, graph_calls)


def test_the_claims_insert_itself_refuses_a_canary_run(demo_policy):
    """The guard is in the INSERT's own WHERE (one statement, both databases)."""
    canary = plant()
    effect = Effect(
        key=f"{canary.run_id}:direct",
        run_id=canary.run_id,
        tool="refund_order",
        args={},
        args_fingerprint="x",
        status=Effect.Status.CLAIMED,
    )
    assert effect_insert_fenced(effect, owner=None, compensating=True, now=timezone.now()) is False
    assert not Effect.objects.exists()
    real = AgentRun.objects.exclude(pk=canary.run_id).first()
    assert real is None  # the only run is the canary's: the next insert is for a real one
    from tests.support.factories import RunFactory

    other = RunFactory()
    effect.run_id = other.pk
    effect.key = f"{other.pk}:direct"
    assert effect_insert_fenced(effect, owner=None, compensating=True, now=timezone.now())


def test_an_advance_of_a_pending_canary_invokes_nothing_and_leaves_it_waiting(
    demo_policy, graph_calls
):
    canary = plant()
    assert tasks.run_advance(str(canary.run_id)).startswith("skipped: canary")
    assert graph_calls == []
    run = AgentRun.objects.get(pk=canary.run_id)
    assert run.status == AgentRun.Status.WAITING  # as any paused run, to its reviewers
    assert ApprovalRequest.objects.get(pk=canary.approval_id).is_pending


def test_an_effect_of_a_run_being_planted_is_refused_before_its_canary_row_exists(demo_policy):
    """The planting drive runs the agent's graph before the Canary row can exist (it names the
    approval the drive opens): meanwhile the claim refuses the run's effects too."""
    from agents.effects.canary import canary_planting
    from tests.support.factories import RunFactory

    run = RunFactory()
    effect = Effect(
        key=f"{run.pk}:direct",
        run_id=run.pk,
        tool="refund_order",
        args={},
        args_fingerprint="x",
        status=Effect.Status.CLAIMED,
    )
    with canary_planting(run.pk), pytest.raises(CanaryRunRefused):
        effect_insert_fenced(effect, owner=None, compensating=True, now=timezone.now())
    assert not Effect.objects.exists()
    # Only while it is planted, and only that run.
    assert effect_insert_fenced(effect, owner=None, compensating=True, now=timezone.now())
