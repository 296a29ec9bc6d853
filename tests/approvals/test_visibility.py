"""One visibility rule for pages and API (found by the hostile review of the restructuring):
who may decide an approval may read it and its run; who may not see a run may not cancel it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from approvals.models import AgentRun, RiskTier
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.people import client_for, person, rest_client_for

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("queued")]


@pytest.fixture
def gina(db):
    """An approver by group membership only (tier write's approver group), no permissions."""
    sre = Group.objects.create(name="sre")
    tier, _ = RiskTier.objects.get_or_create(name="write", defaults={"level": 1})
    tier.approver_groups.add(sre)
    return person("gina", groups=[sre])


def test_a_group_approver_reads_what_they_may_decide(alice, gina):
    approval = ApprovalFactory(run=RunFactory(requested_by=alice), tier="write")
    api = rest_client_for(gina)
    listed = api.get("/api/approvals/?status=pending&mine=true").json()["results"]
    assert [row["id"] for row in listed] == [approval.pk]
    assert api.get(f"/api/approvals/{approval.pk}/").status_code == 200
    assert api.get(f"/api/runs/{approval.run_id}/").status_code == 200
    page = client_for(gina)
    assert page.get(f"/approvals/{approval.pk}/").status_code == 200
    assert page.get(f"/runs/{approval.run_id}/").status_code == 200


def test_a_group_approver_does_not_see_runs_they_have_nothing_to_decide_on(alice, gina):
    other = RunFactory(requested_by=alice)
    api = rest_client_for(gina)
    assert api.get(f"/api/runs/{other.pk}/").status_code == 404
    assert api.get("/api/runs/").json()["results"] == []


def test_staff_who_may_not_see_a_run_may_not_cancel_it(alice):
    run = RunFactory(requested_by=alice, input={"secret": "card 4111"})
    ApprovalFactory(run=run)
    sam = person("sam")
    sam.is_staff = True
    sam.save()
    api = rest_client_for(sam)
    assert api.get(f"/api/runs/{run.pk}/").status_code == 404
    response = api.post(f"/api/runs/{run.pk}/cancel/")
    assert response.status_code == 403
    assert "card 4111" not in response.content.decode()
    run.refresh_from_db()
    assert run.status != AgentRun.Status.CANCELLED
