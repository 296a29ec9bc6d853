"""Nothing acts on an erased run again: no decision, fork, time travel, compensation or
reconciliation; its history says "erased"."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from agents.effects.compensation import run_compensate
from agents.effects.reconcile import effects_reconcile
from agents.erasure import runs_erase
from agents.models import Effect
from agents.runtime import advance
from agents.selectors import CheckpointErased, run_history, run_state_at
from agents.services import ForkRefused, run_fork, run_start
from approvals.models import AgentRun, ApprovalRequest
from approvals.services import run_mark_failed
from audit.models import AuditEvent
from tests.agents.erasure.conftest import refund_input
from tests.support.people import client_for, rest_client_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

REASON = "subject request 12"


@pytest.fixture
def erased(driven, frank):
    history = run_history(run=driven.run)
    runs_erase(runs=[driven.run], user=frank, reason=REASON)
    driven.run.refresh_from_db()
    driven.history = history
    return driven


def test_a_decision_on_an_erased_run_s_approval_gets_409(erased, carol):
    approval = erased.run.approvals.get()
    response = rest_client_for(carol).post(
        f"/api/approvals/{approval.pk}/decision/",
        {"decision": "approve", "payload_hash": approval.payload_hash},
        format="json",
    )
    assert response.status_code == 409
    assert response.json()["reason"] == "erased"
    assert "personal data was erased" in response.json()["detail"]


def test_fork_and_time_travel_refuse_an_erased_run(erased, admin):
    checkpoint_id = erased.history[0]["checkpoint_id"]
    with pytest.raises(ForkRefused, match="erased"):
        run_fork(run=erased.run, checkpoint_id=checkpoint_id, user=admin)
    assert run_history(run=erased.run) == []
    with pytest.raises(CheckpointErased):
        run_state_at(run=erased.run, checkpoint_id=checkpoint_id)
    client = client_for(admin)
    page = client.get(f"/runs/{erased.run.pk}/steps/{checkpoint_id}/")
    assert page.status_code == 410
    assert 'data-retention="erased"' in page.content.decode()
    assert client.get(f"/runs/{erased.run.pk}/").status_code == 200


def test_compensation_and_reconciliation_skip_an_erased_run(erased):
    effect = Effect.objects.filter(run=erased.run).order_by("id").first()
    assert effect.status == Effect.Status.SUCCEEDED
    assert run_compensate(run_id=str(erased.run.pk)) == []
    assert Effect.objects.get(pk=effect.pk).status == Effect.Status.SUCCEEDED
    # Long quiet: a lookup finding no sandbox row (erasure deleted them) would say "not done".
    long_ago = timezone.now() - dt.timedelta(days=1)
    Effect.objects.filter(pk=effect.pk).update(status=Effect.Status.IN_DOUBT, updated_at=long_ago)
    assert effects_reconcile() == {"succeeded": 0, "not_done": 0, "escalated": 0}
    assert Effect.objects.get(pk=effect.pk).status == Effect.Status.IN_DOUBT
    assert not AuditEvent.objects.filter(action="effect.escalated").exists()


def test_erasure_closes_the_pending_approvals_of_a_run_that_ended_waiting(alice, frank):
    run = run_start(agent="refund_agent", input=refund_input(), user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    run_mark_failed(run=AgentRun.objects.get(pk=run.pk), error="gave up", dead=True)
    runs_erase(runs=[run], user=frank, reason=REASON)
    approval = run.approvals.get()
    assert approval.status == ApprovalRequest.Status.EXPIRED
    assert approval.decided_by_label == "erasure"


def test_the_compliance_group_may_erase(frank, dave):
    assert frank.has_perm("agents.erase_run")
    assert not dave.has_perm("agents.erase_run")
    assert Permission.objects.filter(
        codename="erase_run", group__name="compliance", content_type__app_label="agents"
    ).exists()
