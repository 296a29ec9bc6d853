"""Canaries: planting, what a reviewer sees before and after deciding one, and the outcome
(docs/autonomy.md). The inert run is tested in tests/agents/test_canary_inert.py."""

from __future__ import annotations

import datetime as dt
from unittest import mock

import pytest
from django.utils import timezone

from approvals.models import (
    AgentRun,
    ApprovalRequest,
    Canary,
    MetricsCount,
    Notification,
)
from approvals.services.canaries import CanaryRefused, canaries_plant_due, canary_plant
from audit.models import AuditEvent
from tests.approvals.canary_support import plan_for, plant
from tests.support.approvals import decide, request_approval
from tests.support.people import client_for, rest_client_for

pytestmark = pytest.mark.django_db


# Committed (transaction=True): the agent's graph reads the policy in LangGraph's worker thread,
# on a connection of its own, as a real advance does.
@pytest.mark.django_db(transaction=True)
def test_a_planted_canary_is_a_waiting_run_with_a_pending_approval_like_a_real_one(
    demo_policy, bob
):
    canary = plant("refund_doubled_amount")
    run = AgentRun.objects.get(pk=canary.run_id)
    approval = ApprovalRequest.objects.get(pk=canary.approval_id)
    assert (run.status, run.agent, run.thread_id) == ("waiting", "refund_agent", str(run.pk))
    assert run.requested_by == canary.plan.requested_as
    assert (approval.status, approval.tier, approval.tool) == ("pending", "write", "refund_order")
    assert approval.expires_at > timezone.now()
    # The edit that doubles an amount: twice the order total its evidence states.
    total = run.input["amount"]
    assert float(approval.args["amount"]) == pytest.approx(2 * float(total))
    assert f"order total {total} USD" in approval.payload["evidence"][0]
    # The run's own trail is an ordinary one; the canary's marks name no run or approval.
    trail = list(
        AuditEvent.objects.filter(run_id=run.pk).order_by("seq").values_list("action", flat=True)
    )
    assert trail == ["run.created", "run.started", "approval.requested", "run.waiting"]
    planted = AuditEvent.objects.get(action="canary.planted")
    assert (planted.run_id, planted.approval_id) == (None, None)
    assert planted.data["approval"] == approval.pk and planted.data["run"] == str(run.pk)
    # Reviewers are notified as for any approval.
    assert Notification.objects.filter(approval=approval, event="request").exists()


def test_each_template_builds_a_payload_with_the_real_gates_fields(demo_policy):
    from agents.hitl.gate import gate_payload

    for name, tier in [
        ("refund_unknown_account", "write"),
        ("refund_doubled_amount", "write"),
        ("rollback_wrong_service", "critical"),
    ]:
        approval = ApprovalRequest.objects.get(pk=plant(name, tier=tier).approval_id)
        real = gate_payload(
            thread_id="t",
            tool=approval.tool,
            args=approval.args,
            rationale="",
            evidence=[],
            tier=tier,
        )
        assert set(approval.payload) == set(real), name
        assert approval.payload["blast_radius"] == real["blast_radius"]
        assert approval.payload["args_schema"] == real["args_schema"]
        assert approval.payload["run_url"].endswith(f"/runs/{approval.run.thread_id}/")


def test_the_rollback_template_rolls_back_another_service_than_the_failing_one(demo_policy):
    approval = ApprovalRequest.objects.get(
        pk=plant("rollback_wrong_service", tier="critical").approval_id
    )
    assert approval.args["service"] != approval.run.input["service"]
    assert approval.payload["evidence"][0].startswith(approval.run.input["service"])


def test_a_requester_who_could_decide_the_tier_is_refused(demo_policy, bob, admin):
    for requester in (bob, admin):
        with pytest.raises(CanaryRefused):
            canary_plant(plan=plan_for("write", requested_as=requester))
    assert not Canary.objects.exists() and not AgentRun.objects.exists()


def test_a_reviewer_cannot_tell_a_pending_canary_from_a_real_approval(demo_policy, alice, bob):
    canary = plant("refund_unknown_account")
    real = request_approval(requester=alice, tier="write")
    api = rest_client_for(bob)
    fake_body = api.get(f"/api/approvals/{canary.approval_id}/").json()
    real_body = api.get(f"/api/approvals/{real.pk}/").json()
    assert set(fake_body) == set(real_body)
    assert "canary" not in fake_body
    run_fake = api.get(f"/api/runs/{canary.run_id}/").json()
    run_real = api.get(f"/api/runs/{real.run_id}/").json()
    assert set(run_fake) == set(run_real)
    pages = client_for(bob)
    for url in (
        f"/approvals/{canary.approval_id}/",
        "/",
        f"/runs/{canary.run_id}/",
    ):
        response = pages.get(url)
        assert response.status_code == 200, url
        text = response.content.decode().lower()
        assert "canary" not in text, url
        assert "test proposal" not in text, url
    assert "canary" not in str(api.get("/api/approvals/").json()).lower()


@pytest.mark.parametrize(
    ("decision", "extra", "outcome"),
    [
        ("reject", {"message": "twice the order total"}, "caught"),
        ("respond", {"message": "which account is this?"}, "caught"),
        ("approve", {}, "missed"),
    ],
)
def test_the_decide_api_tells_the_decider_it_was_a_test(demo_policy, bob, decision, extra, outcome):
    canary = plant("refund_doubled_amount")
    approval = ApprovalRequest.objects.get(pk=canary.approval_id)
    response = rest_client_for(bob).post(
        f"/api/approvals/{approval.pk}/decision/",
        {"decision": decision, "payload_hash": approval.payload_hash, **extra},
        format="json",
    )
    assert response.status_code == 200, response.json()
    told = response.json()["canary"]
    assert (told["template"], told["outcome"]) == ("refund_doubled_amount", outcome)
    assert told["title"] == "A refund of twice the order total"
    canary.refresh_from_db()
    assert (canary.outcome, canary.decided_by) == (outcome, bob)
    assert canary.told_at is not None


def test_deciding_a_real_approval_answers_without_a_canary_field(demo_policy, alice, bob):
    real = request_approval(requester=alice, tier="write")
    response = rest_client_for(bob).post(
        f"/api/approvals/{real.pk}/decision/",
        {"decision": "approve", "payload_hash": real.payload_hash},
        format="json",
    )
    assert response.status_code == 200
    assert "canary" not in response.json()


def test_the_page_tells_the_decider_after_the_decision_and_only_them(demo_policy, bob, carol):
    canary = plant("refund_unknown_account")
    approval = ApprovalRequest.objects.get(pk=canary.approval_id)
    pages = client_for(bob)
    response = pages.post(
        f"/approvals/{approval.pk}/decide/",
        {"decision": "approve", "seen_hash": approval.payload_hash},
        follow=True,
    )
    assert response.status_code == 200
    assert "was a test proposal planted by compliance" in response.content.decode()
    detail = pages.get(f"/approvals/{approval.pk}/").content.decode()
    assert 'id="canary-told"' in detail and 'data-outcome="missed"' in detail
    assert "It would have refunded" in detail
    canary.refresh_from_db()
    assert canary.told_at is not None
    # carol, who did not decide it, is not told (she might tell the next reviewer).
    assert "canary-told" not in client_for(carol).get(f"/approvals/{approval.pk}/").content.decode()


def test_a_canary_is_left_out_of_the_rollups_and_the_decision_counters(demo_policy, bob):
    canary = plant()
    counted = MetricsCount.objects.count()
    with mock.patch("approvals.services.decision_final.decision_observe") as observed:
        decide(ApprovalRequest.objects.get(pk=canary.approval_id), bob, "reject", message="no")
    assert MetricsCount.objects.count() == counted
    assert observed.call_count == 0


def test_a_real_decision_still_reaches_the_rollups(demo_policy, alice, bob):
    real = request_approval(requester=alice, tier="write")
    counted = MetricsCount.objects.count()
    decide(real, bob, "approve")
    assert MetricsCount.objects.count() > counted


def test_the_sweep_plants_at_the_plans_rate_evenly_spaced(demo_policy):
    plan_for("write", per_day=4)  # one every six hours
    now = timezone.now()
    assert canaries_plant_due(now=now) == 1
    assert canaries_plant_due(now=now + dt.timedelta(hours=5, minutes=59)) == 0
    assert canaries_plant_due(now=now + dt.timedelta(hours=6)) == 1
    assert Canary.objects.count() == 2


def test_an_inactive_plan_plants_nothing(demo_policy):
    plan_for("write", per_day=24, is_active=False)
    assert canaries_plant_due(now=timezone.now()) == 0


def test_a_plans_templates_limit_what_it_plants(demo_policy):
    plan = plan_for("write", templates=["refund_unknown_account"])
    for _ in range(3):
        canary_plant(plan=plan)
    assert set(Canary.objects.values_list("template", flat=True)) == {"refund_unknown_account"}


def test_a_rebuild_of_the_rollups_leaves_canaries_out_too(demo_policy, alice, bob):
    from approvals.rollup_rebuild import rollups_rebuild

    real = request_approval(requester=alice, tier="write")
    decide(real, bob, "approve")
    counted = sorted(MetricsCount.objects.values_list("dimension", "group_key", "n"))
    canary = plant()
    decide(ApprovalRequest.objects.get(pk=canary.approval_id), bob, "approve")
    rollups_rebuild(progress=lambda line: None)
    assert sorted(MetricsCount.objects.values_list("dimension", "group_key", "n")) == counted
