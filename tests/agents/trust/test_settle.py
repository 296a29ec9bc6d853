"""A person settles an effect the console could not (invariant 13): it happened, it did not
(and is not called), or call it once more. Audited; the flagged run goes on."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from agents.effects import ledger
from agents.effects.errors import EffectInDoubt, ToolError, ToolTimeout
from agents.effects.ledger import effect_execute
from agents.effects.reconcile import effects_reconcile
from agents.models import Effect
from agents.services import SettleRefused, effect_settle
from agents.tools import tool_unregister
from approvals.models import AgentRun
from approvals.services import policy_seed_demo, run_flag
from audit.models import AuditEvent
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.people import client_for
from tests.support.providers import KeylessProvider, keyless_tool_register

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]


@pytest.fixture
def escalated(settings, monkeypatch, alice):
    """A keyless payment that went in doubt, was escalated, and flagged its run."""
    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    downstream = KeylessProvider("act_then_timeout")
    keyless_tool_register("kpay", downstream)
    run = RunFactory(requested_by=alice)
    key = f"{run.thread_id}:call-1"
    with pytest.raises(ToolTimeout):
        effect_execute(run_id=str(run.id), key=key, tool="kpay", args={"amount": 70})
    with pytest.raises(EffectInDoubt) as doubt:
        effect_execute(run_id=str(run.id), key=key, tool="kpay", args={"amount": 70})
    run_flag(run=run, reason=str(doubt.value))
    yield run, Effect.objects.get(key=key), downstream
    tool_unregister("kpay")


def _replay(run: AgentRun, effect: Effect) -> Any:
    return effect_execute(run_id=str(run.id), key=effect.key, tool="kpay", args={"amount": 70})


def test_it_happened_keeps_it_once_and_the_run_goes_on(escalated, bob):
    run, effect, downstream = escalated
    settled = effect_settle(effect=effect, outcome="done", user=bob, note="seen in the bank")
    assert settled.status == Effect.Status.SUCCEEDED
    assert _replay(run, effect) == {"settled_by": "bob", "note": "seen in the bank"}
    assert downstream.payments == [70]
    run.refresh_from_db()
    assert run.flag == ""
    assert AuditEvent.objects.filter(action="effect.settled", run_id=run.id).count() == 1
    assert AuditEvent.objects.filter(action="run.unflagged", run_id=run.id).count() == 1


def _quiet(effect: Effect, settings) -> Effect:
    """Time passes: no call made under the key can still land."""
    Effect.objects.filter(pk=effect.pk).update(
        updated_at=timezone.now() - dt.timedelta(seconds=settings.EFFECT_SETTLE_AFTER_SECONDS + 1)
    )
    effect.refresh_from_db()
    return effect


def test_it_did_not_happen_cannot_be_said_while_a_call_may_still_land(escalated, bob, settings):
    """The keyless call timed out moments ago: it may still land. "It did not happen" waits for
    the quiet period (the time is named); "it happened" and "call it again" do not."""
    run, effect, downstream = escalated
    with pytest.raises(SettleRefused, match="may still land") as refused:
        effect_settle(effect=effect, outcome="not_done", user=bob)
    assert refused.value.errors == {"outcome": "a call may still land"}
    effect.refresh_from_db()
    assert effect.status == Effect.Status.IN_DOUBT
    effect_settle(effect=_quiet(effect, settings), outcome="not_done", user=bob)
    assert Effect.objects.get(pk=effect.pk).settlement == "not_done"


def test_it_did_not_happen_means_it_is_not_called(escalated, bob, settings):
    run, effect, downstream = escalated
    effect_settle(effect=_quiet(effect, settings), outcome="not_done", user=bob)
    with pytest.raises(ToolError, match="settled it as not done"):
        _replay(run, effect)
    assert downstream.payments == [70]


def test_call_it_again_allows_exactly_one_more_call(escalated, bob):
    run, effect, downstream = escalated
    effect_settle(effect=effect, outcome="retry", user=bob)
    assert _replay(run, effect) == {"paid": 70}
    assert _replay(run, effect) == {"paid": 70}  # stored: no third call
    assert downstream.payments == [70, 70]


def test_only_reviewers_settle_and_only_once(escalated, alice, bob, dave):
    run, effect, downstream = escalated
    with pytest.raises(SettleRefused):
        effect_settle(effect=effect, outcome="done", user=dave)
    alice.user_permissions.add(*bob.user_permissions.all())  # a reviewer, but the requester
    with pytest.raises(SettleRefused, match="four eyes"):
        effect_settle(effect=effect, outcome="done", user=alice)
    effect_settle(effect=effect, outcome="done", user=bob)
    with pytest.raises(SettleRefused):
        effect_settle(effect=effect, outcome="retry", user=bob)


def test_the_run_page_offers_the_answer_and_settles(escalated, bob, dave, settings):
    run, effect, downstream = escalated
    _quiet(effect, settings)
    # Bob sees the run as an approver of one of its approvals (issue 12: the right to decide
    # alone no longer shows every run).
    ApprovalFactory(run=run, status="approved")
    page = client_for(bob).get(f"/runs/{run.pk}/").content.decode()
    assert "Waiting for a person" in page and "It did not happen" in page
    response = client_for(bob).post(
        f"/runs/{run.pk}/effects/{effect.pk}/settle/", {"outcome": "not_done", "note": "no"}
    )
    assert response.status_code == 302
    effect.refresh_from_db()
    assert effect.settlement == "not_done" and effect.settled_by == "bob"
    assert (
        client_for(dave)
        .post(f"/runs/{run.pk}/effects/{effect.pk}/settle/", {"outcome": "done"})
        .status_code
        == 404
    )  # dave does not see alice's run


def test_the_sweep_escalates_it_once(escalated):
    run, effect, downstream = escalated
    assert effects_reconcile()["escalated"] == 0  # already escalated by the replay
    assert AuditEvent.objects.filter(action="effect.escalated", run_id=run.id).count() == 1


def test_an_approver_of_the_effects_tier_sees_a_run_that_asked_nobody(escalated, bob, dave):
    """A write-tier payment went in doubt in a run with no approval: those who may settle it
    (approvers of its tier) must see the run to answer; others still do not."""
    run, effect, downstream = escalated
    page = client_for(bob).get(f"/runs/{run.pk}/")
    assert page.status_code == 200 and "Waiting for a person" in page.content.decode()
    assert client_for(bob).get(f"/api/runs/{run.pk}/").status_code == 200
    assert client_for(dave).get(f"/runs/{run.pk}/").status_code == 404


def test_a_critical_effect_shows_its_run_to_those_who_may_settle_it_alone(escalated, bob, carol):
    """Demo policy: critical needs a member of approvers-critical, so one answer from bob (a
    write approver who may vote on critical approvals) settles nothing, and he does not see it."""
    policy_seed_demo()
    carol.groups.add(Group.objects.get(name="approvers-critical"))
    bob.groups.add(Group.objects.get(name="approvers-write"))
    run, effect, downstream = escalated
    Effect.objects.filter(pk=effect.pk).update(tier="critical")
    effect.refresh_from_db()
    assert client_for(carol).get(f"/runs/{run.pk}/").status_code == 200
    assert client_for(bob).get(f"/runs/{run.pk}/").status_code == 404
    with pytest.raises(SettleRefused):
        effect_settle(effect=effect, outcome="done", user=bob)


def test_an_effect_escalated_before_the_tier_column_existed_still_shows_its_run_to_its_settlers(
    escalated, bob
):
    """Migration 0007 adds ``tier`` as "" to every row, escalated ones included: the sweep
    fills it, or a run that asked nobody and went in doubt before the upgrade would be seen only
    by its requester (who may not settle it) and compliance."""
    run, effect, downstream = escalated
    Effect.objects.filter(pk=effect.pk).update(tier="")  # as 0007 leaves it
    effects_reconcile()

    assert client_for(bob).get(f"/runs/{run.pk}/").status_code == 200
