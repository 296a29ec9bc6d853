"""One visibility rule for pages and API (found by the hostile review of the restructuring):
who may decide an approval may read it and its run; who may not see a run may not cancel it.
Issue 12 wrote the rule out: the requester, the allowed approvers of the tier of one of its
approvals, compliance, superusers; managers see aggregates only (docs/security.md)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from approvals.models import AgentRun, RiskTier
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.people import DECIDE, client_for, person, rest_client_for

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
    assert response.status_code == 404  # as for a run that does not exist
    assert "card 4111" not in response.content.decode()
    run.refresh_from_db()
    assert run.status != AgentRun.Status.CANCELLED


@pytest.fixture
def vault_run(demo_policy, alice):
    """Alice's run waiting in a tier whose approver group has no members."""
    tier = RiskTier.objects.create(name="vault", level=99)
    tier.approver_groups.add(Group.objects.create(name="vault-keepers"))
    run = RunFactory(requested_by=alice, input={"secret": "vault-input"})
    ApprovalFactory(run=run, tier="vault")
    return run


def _api_sees(user, run) -> bool:
    client = rest_client_for(user)
    detail = client.get(f"/api/runs/{run.pk}/")
    listed = str(run.pk) in {row["id"] for row in client.get("/api/runs/").json()["results"]}
    approvals = {row["run"] for row in client.get("/api/approvals/").json()["results"]}
    assert (detail.status_code == 200) == listed == (str(run.pk) in approvals)
    return listed


def _page_sees(user, run) -> bool:
    client = client_for(user)
    approval = run.approvals.get()
    statuses = {
        client.get(f"/runs/{run.pk}/").status_code,
        client.get(f"/approvals/{approval.pk}/").status_code,
    }
    assert len(statuses) == 1, statuses
    return statuses == {200}


def test_the_right_to_decide_does_not_show_runs_of_a_tier_one_may_not_decide(vault_run, bob, carol):
    assert not _api_sees(bob, vault_run)
    assert not _api_sees(carol, vault_run)
    assert not _page_sees(bob, vault_run)


def test_the_decide_permission_alone_shows_only_tiers_that_configure_no_group(demo_policy, alice):
    loner = person("loner", perms=[DECIDE])
    grouped = ApprovalFactory(run=RunFactory(requested_by=alice), tier="write").run
    ungrouped = ApprovalFactory(run=RunFactory(requested_by=alice), tier="unconfigured").run

    assert not _api_sees(loner, grouped)
    assert _api_sees(loner, ungrouped)


def test_an_approver_sees_a_run_with_an_approval_of_their_tier(demo_policy, alice, bob):
    run = ApprovalFactory(run=RunFactory(requested_by=alice), tier="write").run

    assert _api_sees(bob, run)
    assert _page_sees(bob, run)


def test_compliance_reads_every_run_and_approval_but_decides_and_cancels_nothing(vault_run, frank):
    approval = vault_run.approvals.get()

    assert _api_sees(frank, vault_run)
    assert _page_sees(frank, vault_run)
    cancel = rest_client_for(frank).post(f"/api/runs/{vault_run.pk}/cancel/")
    decide = rest_client_for(frank).post(
        f"/api/approvals/{approval.pk}/decision/",
        {"decision": "approve", "payload_hash": approval.payload_hash},
        format="json",
    )
    assert (cancel.status_code, decide.status_code) == (403, 403)


def test_the_read_all_permission_is_an_explicit_grant(vault_run):
    reader = person("reader", perms=["approvals.view_approvalrequest"])

    assert _api_sees(reader, vault_run)


def test_a_manager_sees_the_metrics_but_no_run_or_approval(vault_run, erin):
    assert not _api_sees(erin, vault_run)
    assert not _page_sees(erin, vault_run)
    assert rest_client_for(erin).get("/api/metrics/").status_code == 200


def test_the_requester_and_superusers_see_the_run(vault_run, alice, admin):
    assert _api_sees(alice, vault_run)
    assert _api_sees(admin, vault_run)


def test_the_queues_all_tab_lists_what_the_reader_may_see_and_nothing_else(vault_run, bob, alice):
    write = ApprovalFactory(run=RunFactory(requested_by=alice), tier="write")
    hidden = vault_run.approvals.get()

    html = client_for(bob).get("/", {"scope": "all"}).content.decode()

    assert f"/approvals/{write.pk}/" in html
    assert f"/approvals/{hidden.pk}/" not in html


def test_an_approver_of_the_run_may_cancel_it_and_other_approvers_may_not(vault_run, alice, bob):
    write_run = ApprovalFactory(run=RunFactory(requested_by=alice), tier="write").run

    assert rest_client_for(bob).post(f"/api/runs/{write_run.pk}/cancel/").status_code == 200
    assert rest_client_for(bob).post(f"/api/runs/{vault_run.pk}/cancel/").status_code == 404


def test_deciding_an_approval_one_may_not_see_answers_like_a_missing_one(vault_run, bob):
    # Approval ids are sequential: a 403 naming the tier and its group for a hidden approval
    # (and a 404 for a missing one) lets anyone enumerate the approvals and learn their tiers.
    hidden = vault_run.approvals.get()
    api = rest_client_for(bob)
    body = {"decision": "approve", "payload_hash": hidden.payload_hash}

    refused = api.post(f"/api/approvals/{hidden.pk}/decision/", body, format="json")
    missing = api.post(f"/api/approvals/{hidden.pk + 1000}/decision/", body, format="json")

    assert (refused.status_code, refused.json()) == (missing.status_code, missing.json())
    assert "vault" not in refused.content.decode()
