"""A run whose data key was destroyed (erasure): its pages, the API and the admin say "erased"
where its personal data was, and nothing fails to render."""

from __future__ import annotations

import pytest
from django.urls import reverse
from django.utils import timezone

from approvals.models import AgentRun, ApprovalRequest
from approvals.services import run_mark_failed
from core.sealing import datakeys_destroy
from tests.support.approvals import decide, request_approval
from tests.support.factories import RunFactory
from tests.support.people import client_for, rest_client_for

pytestmark = pytest.mark.django_db

SECRET = "ada.lovelace@example.com"


@pytest.fixture
def erased(demo_policy, alice, bob, carol) -> dict:
    """Alice's failed run with a decided approval (bob's message) and one still pending, both
    naming SECRET; then erased (the key destroyed, erased_at set, as erasure does)."""
    run = RunFactory(requested_by=alice, input={"email": SECRET})
    decided = request_approval(
        requester=alice, tier="write", run=run, args={"order_id": SECRET, "amount": 5}
    )
    AgentRun.objects.filter(pk=run.pk).update(status=AgentRun.Status.RUNNING)
    run.refresh_from_db()
    pending = request_approval(
        requester=alice, tier="write", run=run, args={"order_id": SECRET, "amount": 7}
    )
    decide(decided, bob, "reject", message=f"ask {SECRET}")
    run = run_mark_failed(run=run, error=f"ValueError: {SECRET}", dead=True)
    datakeys_destroy([run.pk])
    AgentRun.objects.filter(pk=run.pk).update(erased_at=timezone.now())
    return {"run": run, "decided": decided, "pending": pending}


@pytest.fixture
def demo_policy(db, alice, bob, carol):
    from django.contrib.auth.models import Group

    from approvals.services import policy_seed_demo

    policy_seed_demo()
    groups = {g.name: g for g in Group.objects.all()}
    bob.groups.add(groups["approvers-write"])
    carol.groups.add(groups["approvers-write"], groups["approvers-critical"])
    return groups


def test_before_erasure_the_pages_show_the_data(demo_policy, alice, bob):
    """Control: the checks below would see the data if it were there."""
    run = RunFactory(requested_by=alice, input={"email": SECRET})
    approval = request_approval(
        requester=alice, tier="write", run=run, args={"order_id": SECRET, "amount": 5}
    )
    run_page = client_for(alice).get(reverse("agents:run", args=[approval.run_id]))
    approval_page = client_for(bob).get(reverse("approvals:detail", args=[approval.pk]))
    assert SECRET in run_page.content.decode() and SECRET in approval_page.content.decode()
    assert "Personal data erased" not in run_page.content.decode()


def test_the_run_page_says_erased_with_a_banner(erased, alice):
    response = client_for(alice).get(reverse("agents:run", args=[erased["run"].pk]))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Personal data erased" in html and 'data-erased="run"' in html
    assert html.count('<span class="erased">erased</span>') == 3  # input, output, error
    assert SECRET not in html


def test_the_approval_page_says_erased_and_offers_no_decision(erased, bob):
    as_bob = client_for(bob)
    for approval in (erased["decided"], erased["pending"]):
        response = as_bob.get(reverse("approvals:detail", args=[approval.pk]))
        html = response.content.decode()
        assert response.status_code == 200
        assert "Personal data erased" in html and '<span class="erased">erased</span>' in html
        assert SECRET not in html
        assert 'id="decide-approve"' not in html and 'name="decision"' not in html
    html = as_bob.get(reverse("approvals:detail", args=[erased["decided"].pk])).content.decode()
    assert 'Decision and message: <span class="erased">erased</span>' in html


def test_a_decision_on_an_erased_run_is_refused(erased, bob):
    from approvals.services import DecisionConflict

    pending = ApprovalRequest.objects.get(pk=erased["pending"].pk)
    with pytest.raises(DecisionConflict, match="erased"):
        decide(pending, bob, "approve")


def test_the_runs_api_reads_null_and_says_erased(erased, alice):
    as_alice = rest_client_for(alice)
    body = as_alice.get(f"/api/runs/{erased['run'].pk}/").json()
    assert body["erased"] is True
    assert body["input"] is None and body["output"] is None and body["error"] == ""
    assert {a["erased"] for a in body["approvals"]} == {True}
    assert all(a["args"] is None and a["payload"] is None for a in body["approvals"])
    assert SECRET not in str(body)
    listed = as_alice.get("/api/runs/").json()["results"]
    assert [r["erased"] for r in listed if r["id"] == str(erased["run"].pk)] == [True]


def test_the_approvals_api_reads_null_and_says_erased(erased, bob):
    as_bob = rest_client_for(bob)
    body = as_bob.get(f"/api/approvals/{erased['decided'].pk}/").json()
    assert body["erased"] is True and body["can_decide"] is False
    assert body["args"] is None and body["payload"] is None and body["decision"] is None
    assert body["payload_hash"] == erased["decided"].payload_hash  # a plain column: unchanged
    assert SECRET not in str(body)
    pending = as_bob.get(f"/api/approvals/{erased['pending'].pk}/").json()
    assert pending["erased"] is True and pending["can_decide"] is False


def test_a_run_not_erased_reads_erased_false_in_the_api(demo_policy, alice):
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": SECRET, "amount": 5}
    )
    body = rest_client_for(alice).get(f"/api/runs/{approval.run_id}/").json()
    assert body["erased"] is False and body["input"] == {}
    assert body["approvals"][0]["args"] == {"order_id": SECRET, "amount": 5}


def test_the_admin_shows_erased_for_sealed_fields(erased, admin):
    as_admin = client_for(admin)
    pages = [
        reverse("admin:approvals_agentrun_change", args=[erased["run"].pk]),
        reverse("admin:approvals_approvalrequest_change", args=[erased["decided"].pk]),
        reverse("admin:approvals_approvalvote_change", args=[erased["decided"].votes.get().pk]),
        reverse("admin:approvals_agentrun_changelist"),
        reverse("admin:approvals_approvalrequest_changelist"),
    ]
    for url in pages:
        response = as_admin.get(url)
        html = response.content.decode()
        assert response.status_code == 200, url
        assert SECRET not in html, url
    run_page = as_admin.get(pages[0]).content.decode()
    assert '<div class="readonly">erased</div>' in run_page


def test_the_admin_shows_sealed_fields_opened(demo_policy, alice, admin):
    approval = request_approval(
        requester=alice, tier="write", args={"order_id": SECRET, "amount": 5}
    )
    html = (
        client_for(admin)
        .get(reverse("admin:approvals_approvalrequest_change", args=[approval.pk]))
        .content.decode()
    )
    assert SECRET in html and '<div class="readonly">erased</div>' not in html
