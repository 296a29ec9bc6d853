"""The claim card of the approval page, its forms (htmx and plain), and the queue's badge."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from approvals.models import ApprovalClaim, ApprovalRequest, RiskTier
from approvals.services import approval_assign, approval_claim
from audit.models import AuditEvent
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.people import client_for

T0 = dt.datetime(2026, 3, 2, 8, 1, tzinfo=dt.UTC)
HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def clock():
    """08:01, so the pages say "since 08:01"."""
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


@pytest.fixture
def critical(demo_policy, alice) -> ApprovalRequest:
    return ApprovalFactory(run=RunFactory(requested_by=alice), tier="critical")


def _detail(approval: ApprovalRequest) -> str:
    return reverse("approvals:detail", args=[approval.pk])


def _url(name: str, approval: ApprovalRequest) -> str:
    return reverse(f"approvals:{name}", args=[approval.pk])


def test_bob_claims_and_carol_is_warned_but_her_decision_counts(critical, bob, carol):
    response = client_for(bob).post(_url("claim", critical))
    assert response.status_code == 302 and response["Location"] == _detail(critical)

    as_carol = client_for(carol)
    html = as_carol.get(_detail(critical)).content.decode()
    assert "bob is looking at this since 08:01</strong>; your decision will still count." in html
    assert 'id="claim-form"' not in html  # held by bob: nothing for carol to claim

    response = as_carol.post(
        _url("decide", critical),
        {"decision": "reject", "seen_hash": critical.payload_hash, "message": "no"},
    )
    assert response.status_code == 302
    critical.refresh_from_db()
    assert critical.status == ApprovalRequest.Status.REJECTED
    voted = AuditEvent.objects.get(action="approval.voted", approval_id=critical.pk)
    assert voted.data["claimed_by"] == "bob"
    after = as_carol.get(_detail(critical)).content.decode()
    assert "is looking at this" not in after and 'id="approval-claim"' not in after


def test_the_htmx_claim_swaps_the_card_and_shows_a_refusal_in_it(critical, bob, carol):
    mine = client_for(bob).post(_url("claim", critical), **HTMX)
    html = mine.content.decode()
    assert mine.status_code == 200 and mine["X-Claim-Status"] == "200"
    assert html.lstrip().startswith('<section id="approval-claim"')
    assert "You are looking at this since" in html and "Release" in html

    refused = client_for(carol).post(_url("claim", critical), **HTMX)
    assert refused["X-Claim-Status"] == "409"
    assert 'class="errors" role="alert">Not claimed: bob is looking at this since 08:01' in (
        refused.content.decode()
    )

    released = client_for(bob).post(_url("claim-release", critical), **HTMX)
    assert "Nobody is looking at this." in released.content.decode()
    assert not ApprovalClaim.objects.exists()


def test_a_refusal_without_javascript_is_a_message_on_the_approval_page(critical, alice, dave):
    response = client_for(alice).post(_url("claim", critical), follow=True)
    assert response.redirect_chain == [(_detail(critical), 302)]
    assert "Only someone who may decide this approval may claim it." in response.content.decode()
    assert client_for(dave).post(_url("claim", critical)).status_code == 404
    assert client_for(dave).get(_url("claim", critical)).status_code == 405


def test_the_assign_form_is_for_admins_and_tier_leads_and_lists_who_may_decide(
    critical, admin, bob, carol, erin
):
    assert 'id="assign-form"' not in client_for(bob).get(_detail(critical)).content.decode()
    assert client_for(erin).get(_detail(critical)).status_code == 404  # not yet a lead

    leads = Group.objects.create(name="critical-leads")
    RiskTier.objects.filter(name="critical").update(lead_group=leads)
    erin.groups.add(leads)
    html = client_for(erin).get(_detail(critical)).content.decode()
    assert 'id="assign-form"' in html
    assert '<option value="carol">' in html and '<option value="bob">' in html
    assert 'value="alice"' not in html and 'value="dave"' not in html

    response = client_for(erin).post(_url("assign", critical), {"user": "carol"}, follow=True)
    assert "Assigned to carol." in response.content.decode()
    assert "assigned to carol by erin at" in response.content.decode()
    carol_page = client_for(carol).get(_detail(critical)).content.decode()
    assert "Assigned to you by erin at" in carol_page and "Hand it back" in carol_page

    refused = client_for(admin).post(_url("assign", critical), {"user": "dave"}, **HTMX)
    assert refused["X-Claim-Status"] == "400"
    assert "dave may not decide critical actions." in refused.content.decode()

    response = client_for(admin).post(_url("unassign", critical), follow=True)
    assert "The assignment was taken back." in response.content.decode()
    assert not ApprovalClaim.objects.exists()


def test_the_queue_shows_each_rows_claim_and_filters_assigned_to_me(
    demo_policy, alice, admin, bob, carol
):
    run = RunFactory(requested_by=alice)
    claimed = ApprovalFactory(run=run, tier="critical")
    assigned = ApprovalFactory(run=run, tier="critical")
    free = ApprovalFactory(run=run, tier="critical")
    approval_claim(approval=claimed, user=bob)
    approval_assign(approval=assigned, username="carol", by=admin)
    as_carol = client_for(carol)

    html = as_carol.get(reverse("approvals:queue")).content.decode()
    assert 'data-claim="claimed">bob is looking at this since' in html
    assert 'data-claim="assigned">assigned to carol by admin at' in html

    mine = as_carol.get(reverse("approvals:queue"), {"scope": "assigned"}).content.decode()
    assert "Assigned to you" in mine
    assert _detail(assigned) in mine
    assert _detail(claimed) not in mine and _detail(free) not in mine
    assert 'value="assigned" selected' in mine


def test_the_queue_reads_the_claims_of_a_page_in_one_query(demo_policy, alice, bob, carol):
    run = RunFactory(requested_by=alice)
    as_carol = client_for(carol)

    def queue_queries() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert as_carol.get(reverse("approvals:queue")).status_code == 200
        return len(queries)

    approval_claim(approval=ApprovalFactory(run=run, tier="critical"), user=bob)
    queue_queries()  # warm
    one = queue_queries()
    for _ in range(5):
        approval_claim(approval=ApprovalFactory(run=run, tier="critical"), user=bob)
    assert queue_queries() == one
