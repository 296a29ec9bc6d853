"""An external agent's run has the same pages, API, audit and visibility as any run; it is
never advanced by the in-process runner, recovered as an orphan, flagged stuck or forked."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from agents.remote.bodies import remote_request_body
from agents.remote.models import RemoteRequest
from agents.remote.registry import external_agent_save
from agents.runtime import advance, lease, recovery
from approvals.models import AgentRun, ApprovalRequest, Notification, StuckItem
from approvals.services.stuck import stuck_sweep
from tests.agents.remote.conftest import make_agent
from tests.agents.remote.helpers import open_request
from tests.support.approvals import decide
from tests.support.people import client_for, person, rest_client_for


@pytest.fixture
def owners(db) -> Group:
    return Group.objects.create(name="billing-team")


@pytest.fixture
def owned(demo_policy, owners):
    """A waiting request of an agent owned by billing-team."""
    return open_request(make_agent("owned", owner_group=owners))


def test_every_run_page_and_run_api_answers_for_an_external_run(demo_policy, owned, bob):
    remote, [approval] = owned
    run = AgentRun.objects.get(pk=remote.run_id)
    traveller = person("tina", perms=["approvals.decide", "agents.time_travel"])
    traveller.groups.add(Group.objects.get(name="approvers-write"))
    pages = client_for(traveller)
    api = rest_client_for(traveller)

    listing = pages.get("/runs/")
    assert listing.status_code == 200 and "external:owned" in listing.content.decode()
    detail = pages.get(f"/runs/{run.pk}/")
    assert detail.status_code == 200
    assert "refund_order" in detail.content.decode()  # its approvals and audit show
    assert pages.get(f"/runs/{run.pk}/steps/nope/").status_code == 404
    forked = pages.post(f"/runs/{run.pk}/fork/", {"checkpoint_id": "x"}, follow=True)
    assert forked.status_code == 200
    assert "external agent" in forked.content.decode()
    assert AgentRun.objects.count() == 1
    assert pages.get(f"/approvals/{approval.pk}/").status_code == 200

    assert api.get("/api/runs/").status_code == 200
    body = api.get(f"/api/runs/{run.pk}/")
    assert body.status_code == 200
    assert body.json()["agent"] == "external:owned"
    assert api.get(f"/api/approvals/{approval.pk}/").status_code == 200


def test_the_owner_groups_members_see_its_runs_as_a_requester_does(demo_policy, owned, owners):
    remote, _ = owned
    member = person("olga", groups=[owners])
    stranger = person("sam")
    assert client_for(member).get(f"/runs/{remote.run_id}/").status_code == 200
    assert rest_client_for(member).get(f"/api/runs/{remote.run_id}/").status_code == 200
    assert client_for(stranger).get(f"/runs/{remote.run_id}/").status_code == 404
    assert rest_client_for(stranger).get(f"/api/runs/{remote.run_id}/").status_code == 404


def test_a_member_of_the_owner_group_may_still_not_decide_without_the_tier(
    demo_policy, owned, owners
):
    from approvals.services import DecisionForbidden

    _, [approval] = owned
    member = person("olga", groups=[owners])
    with pytest.raises(DecisionForbidden):
        decide(approval, member)


def test_cancel_closes_its_approvals_and_tells_the_agent(demo_policy, owned, admin):
    remote, [approval] = owned
    answer = rest_client_for(admin).post(f"/api/runs/{remote.run_id}/cancel/")
    assert answer.status_code == 200, answer.content
    advance.run_advance(run_id=remote.run_id)
    remote = RemoteRequest.objects.get(pk=remote.pk)
    assert remote.status == RemoteRequest.Status.CANCELLED
    body = remote_request_body(remote=remote)
    assert body["approvals"][0]["status"] == "cancelled"
    assert body["resume"] is None
    assert Notification.objects.get(event=Notification.Event.CALLBACK).payload["status"] == (
        "cancelled"
    )
    advance.run_advance(run_id=remote.run_id)
    assert Notification.objects.filter(event=Notification.Event.CALLBACK).count() == 1


def test_a_cancelled_thread_takes_no_new_request(demo_policy, owned, admin):
    from agents.remote.errors import RemoteRequestConflict
    from agents.services import run_cancel

    remote, _ = owned
    run_cancel(run=AgentRun.objects.get(pk=remote.run_id), user=admin)
    with pytest.raises(RemoteRequestConflict):
        open_request(remote.agent, interrupt_id="i-2")


def test_a_running_external_run_is_never_recovered_or_flagged_stuck(demo_policy, owned, bob):
    remote, [approval] = owned
    decide(approval, bob)
    advance.run_advance(run_id=remote.run_id)
    run = AgentRun.objects.get(pk=remote.run_id)
    assert run.status == AgentRun.Status.RUNNING and run.lease_expires_at is None
    AgentRun.objects.filter(pk=run.pk).update(
        updated_at=timezone.now() - dt.timedelta(days=1), wake_requested=False
    )
    assert recovery.runs_recover() == 0
    later = timezone.now() + dt.timedelta(days=1)
    stuck_sweep(now=later)
    assert (
        not StuckItem.objects.filter(run=run)
        .exclude(kind=StuckItem.Kind.OUTCOME_NOT_REPORTED)
        .exists()
    )


def test_a_waiting_external_run_with_its_approvals_decided_is_not_an_orphan(
    demo_policy, owned, bob
):
    remote, [approval] = owned
    decide(approval, bob)  # its advance never ran
    AgentRun.objects.filter(pk=remote.run_id).update(wake_requested=False)
    stuck_sweep(now=timezone.now() + dt.timedelta(days=1))
    assert not StuckItem.objects.filter(kind=StuckItem.Kind.ORPHANED_INTERRUPT).exists()


def test_the_approval_page_shows_the_agents_evidence_and_rationale(demo_policy, bob):
    agent = make_agent("ctx")
    _, [approval] = open_request(
        agent,
        context={
            "evidence": ["order o-1 arrived broken"],
            "rationale": "customer asked twice",
            "blast_radius": "one refund of 20 USD",
        },
    )
    stored = ApprovalRequest.objects.get(pk=approval.pk)
    assert stored.payload["evidence"] == ["order o-1 arrived broken"]
    page = client_for(bob).get(f"/approvals/{approval.pk}/").content.decode()
    for text in ("order o-1 arrived broken", "customer asked twice", "one refund of 20 USD"):
        assert text in page


def test_a_worker_that_died_closing_a_decided_request_leaves_the_run_to_recovery(
    demo_policy, owned, bob, settings
):
    remote, [approval] = owned
    decide(approval, bob)
    # The decision's advance took the lease (and with it the wake flag) on the waiting run, and
    # its worker was killed before it closed the request or gave the lease back.
    assert lease.lease_acquire(run_id=remote.run_id, owner="killed") is not None
    long_ago = timezone.now() - dt.timedelta(seconds=settings.Q_RETRY + 5)
    AgentRun.objects.filter(pk=remote.run_id).update(
        lease_expires_at=long_ago, updated_at=long_ago, wake_requested=False
    )
    assert AgentRun.objects.get(pk=remote.run_id).status == AgentRun.Status.WAITING

    assert recovery.runs_recover() == 1
    advance.run_advance(run_id=remote.run_id)
    assert RemoteRequest.objects.get(pk=remote.pk).status == RemoteRequest.Status.DECIDED


def test_a_new_owner_group_sees_the_agents_runs_made_before(demo_policy, owned, owners, admin):
    remote, _ = owned
    newcomers = Group.objects.create(name="refunds-team")
    member = person("nina")
    member.groups.add(newcomers)
    agent = remote.agent
    agent.owner_group = newcomers
    external_agent_save(agent=agent, actor=admin)
    assert AgentRun.objects.get(pk=remote.run_id).owner_group == newcomers
    assert rest_client_for(member).get(f"/api/runs/{remote.run_id}/").status_code == 200
