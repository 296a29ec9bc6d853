"""Who may settle an effect, with what, and how many calls "call it again" buys."""

from __future__ import annotations

from typing import Any

import pytest

from agents.effects import ledger
from agents.effects.errors import ToolTimeout
from agents.effects.ledger import effect_execute
from agents.models import Effect
from agents.services import effect_settle
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals.models import AgentRun
from tests.support.pay_agents import (
    escalated_effect,
)
from tests.support.providers import KeylessProvider, PayArgs

pytestmark = pytest.mark.django_db(transaction=True)


def test_settling_a_critical_effect_needs_someone_who_may_decide_critical(alice, queued):
    """Settling decides what happens to an action ("call it again" is one more call of it).
    Eve holds approvals.decide but is in no approver group of the "critical" tier (demo
    policy: approvers-write or approvers-critical, two approvals, one from approvers-critical):
    she may not decide a rollback, so she may not settle one either."""
    from agents.services import SettleRefused
    from approvals.permissions import user_may_approve_tier
    from approvals.services import policy_seed_demo
    from tests.support.factories import RunFactory
    from tests.support.people import DECIDE, person

    policy_seed_demo()
    eve = person("eve", perms=[DECIDE])
    assert not user_may_approve_tier(user=eve, tier="critical")[0]

    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING, agent="incident_copilot")
    effect = escalated_effect(
        run, tool="rollback_deploy", args={"service": "checkout", "to_version": "v41"}
    )
    with pytest.raises(SettleRefused):
        effect_settle(effect=effect, outcome="retry", user=eve)
    effect.refresh_from_db()
    assert effect.status == Effect.Status.IN_DOUBT


def test_call_it_again_submitted_twice_buys_one_call(settings, monkeypatch, alice, bob):
    """The reviewer's "call it again" reaches the server twice (a double click, a retried
    POST, a second tab); the second lands while the one authorized call is in flight. A keyless
    downstream must still be called once more, not twice, and the call's answer not lost."""
    from agents.effects.errors import EffectInDoubt
    from agents.services import SettleRefused
    from approvals.services import run_flag
    from tests.support.factories import RunFactory

    settings.TOOL_MAX_RETRIES = 0
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)
    downstream = KeylessProvider("act_then_timeout")
    second_submit: dict[str, Any] = {}

    def pays(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        if "effect" in second_submit:  # the second POST arrives while this call runs
            try:
                effect_settle(effect=second_submit.pop("effect"), outcome="retry", user=bob)
            except SettleRefused:
                second_submit["refused"] = True
        return downstream.run(args, key)

    tool_register(
        ToolSpec(
            name="kpay2",
            description="p",
            args_model=PayArgs,
            tier="write",
            run=pays,
            takes_key=False,
        )
    )
    try:
        run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
        key = f"{run.thread_id}:call-1"

        def replay() -> Any:
            return effect_execute(run_id=str(run.id), key=key, tool="kpay2", args={"amount": 70})

        with pytest.raises(ToolTimeout):
            replay()
        with pytest.raises(EffectInDoubt) as doubt:
            replay()
        run_flag(run=run, reason=str(doubt.value))
        effect = Effect.objects.get(key=key)
        stale_page_copy = Effect.objects.get(key=key)

        effect_settle(effect=effect, outcome="retry", user=bob)  # the first POST
        second_submit["effect"] = stale_page_copy
        first = replay()  # the one more call; the second POST lands meanwhile
        again = replay()  # the node re-runs later (a retry, a resume): stored, no call
    finally:
        tool_unregister("kpay2")
    assert downstream.payments == [70, 70], (first, again, second_submit)
    assert first == {"paid": 70}
    assert Effect.objects.get(key=key).status == Effect.Status.SUCCEEDED


def test_a_settle_note_with_a_nul_character_is_refused_not_a_500(alice, bob, queued):
    """Decisions refuse NUL characters (Postgres JSON cannot store them); the settle note is
    user text too and goes into the effect's result and the audit event."""
    from tests.support.factories import ApprovalFactory, RunFactory
    from tests.support.people import client_for

    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    ApprovalFactory(run=run, status="approved")  # bob sees the run as one of its approvers
    effect = escalated_effect(run, tool="refund_payment", args={"order_id": "A-1", "amount": "5"})
    client = client_for(bob)
    client.raise_request_exception = False
    response = client.post(
        f"/runs/{run.pk}/effects/{effect.pk}/settle/", {"outcome": "done", "note": "ok\x00"}
    )
    assert response.status_code in (302, 400), response.status_code


def test_settling_needs_the_csrf_token(alice, bob, queued):
    from django.test import Client

    from tests.support.factories import RunFactory

    run = RunFactory(requested_by=alice, status=AgentRun.Status.RUNNING)
    effect = escalated_effect(run, tool="refund_payment", args={"order_id": "A-1", "amount": "5"})
    client = Client(enforce_csrf_checks=True)
    client.force_login(bob)
    response = client.post(f"/runs/{run.pk}/effects/{effect.pk}/settle/", {"outcome": "retry"})
    assert response.status_code == 403
    effect.refresh_from_db()
    assert effect.status == Effect.Status.IN_DOUBT and effect.settlement == ""
