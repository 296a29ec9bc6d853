"""Run pages: list and filters, the start form, the detail with its timeline, cancel, time travel."""

from __future__ import annotations

import re
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from agents import selectors as agent_selectors
from agents import services as agent_services
from agents.models import SandboxTicket
from approvals.models import AgentRun
from audit.models import AuditEvent
from tests.support.factories import EffectFactory
from tests.support.pages import PageApprovalFactory, PageRunFactory
from tests.support.people import DECIDE, client_for, person
from tests.support.probes import PAGE_PROBE as PROBE_AGENT

pytestmark = pytest.mark.usefixtures("queued")  # every task enqueued is recorded, none runs

RUNS = reverse("agents:runs")
NEW = reverse("agents:run-new")


def _run_url(run: AgentRun) -> str:
    return reverse("agents:run", args=[run.pk])


def _history(run: AgentRun) -> list[dict[str, Any]]:
    return [
        {
            "checkpoint_id": "cp-0",
            "step": -1,
            "source": "input",
            "nodes": ["input"],
            "created_at": "2026-01-05T10:00:00+00:00",
            "next": ["triage"],
            "values": {},
            "changed": {},
            "interrupts": [],
            "interrupt_ids": [],
            "forkable": True,
        },
        {
            "checkpoint_id": "cp-1",
            "step": 0,
            "source": "loop",
            "nodes": ["triage"],
            "created_at": "2026-01-05T10:00:02+00:00",
            "next": ["act"],
            "values": {"summary": "<b>db pool exhausted</b>"},
            "changed": {"summary": "<b>db pool exhausted</b>"},
            "interrupts": [],
            "interrupt_ids": [],
            "forkable": True,
        },
    ]


@pytest.fixture
def run_of_alice(alice) -> AgentRun:
    return PageRunFactory(requested_by=alice)


@pytest.fixture
def run_to_review(run_of_alice) -> AgentRun:
    """Alice's run with a pending approval its reviewers may decide: since issue 12 the right to
    decide shows the runs with an approval of a tier one may decide, not every run."""
    PageApprovalFactory(run=run_of_alice)
    return run_of_alice


def _reviewable(run: AgentRun) -> AgentRun:
    PageApprovalFactory(run=run)
    return run


@pytest.fixture
def time_traveller(db) -> User:
    """A reviewer who also holds agents.time_travel."""
    return person("tina", perms=[DECIDE, "agents.time_travel"])


@pytest.fixture
def history():
    with mock.patch.object(
        agent_selectors, "run_history", side_effect=lambda *, run: _history(run)
    ) as patched:
        yield patched


def test_the_run_list_filters_by_status_and_agent(bob, alice):
    as_bob = client_for(bob)
    waiting = _reviewable(PageRunFactory(requested_by=alice, agent="refund_agent"))
    done = _reviewable(
        PageRunFactory(requested_by=alice, agent="incident_copilot", status="completed")
    )
    all_runs = as_bob.get(RUNS).content.decode()
    assert _run_url(waiting) in all_runs and _run_url(done) in all_runs
    by_status = as_bob.get(RUNS, {"status": "completed"}).content.decode()
    assert _run_url(done) in by_status and _run_url(waiting) not in by_status
    by_agent = as_bob.get(RUNS, {"agent": "refund_agent"}).content.decode()
    assert _run_url(waiting) in by_agent and _run_url(done) not in by_agent


def test_the_run_list_shows_people_without_review_rights_only_their_own_runs(alice, dave):
    own = PageRunFactory(requested_by=dave)
    other = PageRunFactory(requested_by=alice)
    html = client_for(dave).get(RUNS).content.decode()
    assert _run_url(own) in html
    assert _run_url(other) not in html


def test_the_run_list_pages_by_keyset(bob, alice):
    as_bob = client_for(bob)
    runs = [_reviewable(PageRunFactory(requested_by=alice)) for _ in range(27)]
    first = as_bob.get(RUNS).content.decode()
    cursor = re.search(r'href="/runs/\?cursor=([^"&]+)" rel="next"', first).group(1)
    second = as_bob.get(RUNS, {"cursor": cursor}).content.decode()
    for run in runs:
        assert (_run_url(run) in first) != (_run_url(run) in second)


def test_the_start_form_offers_the_agents_with_an_example(alice, page_probe):
    as_alice = client_for(alice)
    html = as_alice.get(NEW, {"agent": PROBE_AGENT}).content.decode()
    assert f'<option value="{PROBE_AGENT}" selected>' in html
    assert "&quot;service&quot;: &quot;checkout&quot;" in html


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{not json", "Not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"service": "checkout", "severity": "sev9"}', "severity:"),
        ('{"severity": "sev1"}', "service:"),
    ],
)
def test_the_start_form_rejects_bad_input_next_to_the_field(alice, page_probe, raw, message):
    as_alice = client_for(alice)
    response = as_alice.post(NEW, {"agent": PROBE_AGENT, "input": raw})
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not AgentRun.objects.exists()


def test_the_start_form_rejects_an_unknown_agent(alice, page_probe):
    as_alice = client_for(alice)
    response = as_alice.post(NEW, {"agent": "nobody", "input": "{}"})
    assert response.status_code == 400
    assert not AgentRun.objects.exists()


def test_the_start_form_starts_a_run(alice, page_probe, queued, django_capture_on_commit_callbacks):
    as_alice = client_for(alice)
    with django_capture_on_commit_callbacks(execute=True):
        response = as_alice.post(
            NEW, {"agent": PROBE_AGENT, "input": '{"service": "checkout", "severity": "sev2"}'}
        )
    run = AgentRun.objects.get()
    assert response.status_code == 302
    assert response["Location"] == _run_url(run)
    assert run.requested_by == alice and run.agent == PROBE_AGENT and run.status == "queued"
    assert run.input == {"service": "checkout", "severity": "sev2"}
    assert queued.call_count == 1


def test_the_run_page_shows_its_timeline_approvals_effects_and_events(bob, run_of_alice, history):
    as_bob = client_for(bob)
    approval = PageApprovalFactory(run=run_of_alice)
    effect = EffectFactory(
        run=run_of_alice, status="succeeded", result={"refund": "<script>x</script>"}
    )
    SandboxTicket.objects.create(
        idempotency_key=effect.key, service="checkout", title="Pool exhausted", severity="sev2"
    )
    html = as_bob.get(_run_url(run_of_alice)).content.decode()
    assert "triage" in html and "Step 0" in html
    assert "&lt;b&gt;db pool exhausted&lt;/b&gt;" in html and "<b>db pool" not in html
    assert reverse("approvals:detail", args=[approval.pk]) in html
    assert effect.key in html
    assert '<span class="badge sandbox">Sandbox</span>' in html
    assert "TICKET-" in html and "Pool exhausted" in html
    assert "<script>x</script>" not in html
    # Without the time-travel permission there is no way into past states.
    assert "View state at this step" not in html and "Fork from here" not in html


def test_the_run_page_survives_a_history_that_cannot_be_read(bob, run_to_review):
    as_bob = client_for(bob)
    with mock.patch.object(
        agent_selectors, "run_history", side_effect=RuntimeError("checkpointer down")
    ):
        response = as_bob.get(_run_url(run_to_review))
    assert response.status_code == 200
    assert "The step history could not be read (RuntimeError)." in response.content.decode()


def test_a_stranger_cannot_see_a_run(dave, run_of_alice):
    as_dave = client_for(dave)
    assert as_dave.get(_run_url(run_of_alice)).status_code == 404


def test_the_requester_cancels_a_run_and_its_pending_approvals_close(alice, run_of_alice, history):
    as_alice = client_for(alice)
    approval = PageApprovalFactory(run=run_of_alice)
    page = as_alice.get(_run_url(run_of_alice)).content.decode()
    assert reverse("agents:run-cancel", args=[run_of_alice.pk]) in page
    response = as_alice.post(reverse("agents:run-cancel", args=[run_of_alice.pk]))
    assert response.status_code == 302
    run_of_alice.refresh_from_db()
    approval.refresh_from_db()
    assert run_of_alice.status == "cancelled"
    assert approval.status == "expired"
    assert AuditEvent.objects.filter(action="run.cancelled", run_id=run_of_alice.pk).exists()
    after = as_alice.get(_run_url(run_of_alice)).content.decode()
    assert reverse("agents:run-cancel", args=[run_of_alice.pk]) not in after


def test_someone_who_may_read_but_not_cancel_is_refused(alice, dave):
    run = PageRunFactory(requested_by=alice)
    assert client_for(dave).post(reverse("agents:run-cancel", args=[run.pk])).status_code == 404
    dave.user_permissions.add(
        Permission.objects.get(codename="view_approvalrequest", content_type__app_label="approvals")
    )
    reader = client_for(User.objects.get(pk=dave.pk))
    assert reader.get(_run_url(run)).status_code == 200
    assert reader.post(reverse("agents:run-cancel", args=[run.pk])).status_code == 403
    run.refresh_from_db()
    assert run.status == "waiting"


def test_time_travel_needs_its_permission(bob, run_of_alice, history):
    as_bob = client_for(bob)
    step = reverse("agents:run-step", args=[run_of_alice.pk, "cp-1"])
    fork = reverse("agents:run-fork", args=[run_of_alice.pk])
    assert as_bob.get(step).status_code == 403
    assert as_bob.post(fork, {"checkpoint_id": "cp-1"}).status_code == 403


def test_viewing_the_state_at_a_step_is_audited(time_traveller, run_to_review, history):
    client = client_for(time_traveller)
    detail = client.get(_run_url(run_to_review)).content.decode()
    step_url = reverse("agents:run-step", args=[run_to_review.pk, "cp-1"])
    assert step_url in detail and "Fork from here" in detail
    response = client.get(step_url)
    html = response.content.decode()
    assert response.status_code == 200
    assert "cp-1" in html and "&lt;b&gt;db pool exhausted&lt;/b&gt;" in html
    event = AuditEvent.objects.get(action="run.state_viewed", run_id=run_to_review.pk)
    assert event.actor_username == "tina" and event.data == {"checkpoint_id": "cp-1"}
    assert (
        client.get(reverse("agents:run-step", args=[run_to_review.pk, "nope"])).status_code == 404
    )


def test_fork_from_here_opens_the_new_branch(time_traveller, run_to_review, history):
    child = PageRunFactory(requested_by=time_traveller, status="queued")
    with mock.patch.object(agent_services, "run_fork", return_value=child) as fork:
        response = client_for(time_traveller).post(
            reverse("agents:run-fork", args=[run_to_review.pk]), {"checkpoint_id": "cp-1"}
        )
    assert response.status_code == 302
    assert response["Location"] == _run_url(child)
    assert fork.call_args.kwargs["checkpoint_id"] == "cp-1"
    assert fork.call_args.kwargs["run"] == run_to_review
    assert fork.call_args.kwargs["user"] == time_traveller
