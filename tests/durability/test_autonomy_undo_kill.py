"""An undo of a call that ran without waiting survives SIGKILL of its worker mid-compensation:
the re-delivered task reverses the effect exactly once (one roll-forward downstream)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone
from django_q.tasks import async_task

from agents.models import Effect, SandboxDeploy
from agents.sandbox import systems as sandbox
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from audit.models import AuditEvent
from tests.support.processes import poll_until
from tests.support.runs import is_completed, run_start, run_wait

pytestmark = [
    pytest.mark.durability,
    pytest.mark.django_db(transaction=True),
]

UNDO_TASK = "agents.tasks.autonomous_action_undo"
INCIDENT = {"service": "payments", "signal": "5xx after the deploy", "severity": "sev1"}


def compensations() -> list[SandboxDeploy]:
    return list(SandboxDeploy.objects.filter(idempotency_key__endswith=":compensate"))


def test_a_worker_killed_mid_undo_reverses_the_rollback_exactly_once(
    processes, api_client_for, alice
):
    sandbox.deploy_record(
        service="payments",
        version="v7",
        previous_version="v6",
        deployed_at=timezone.now() - dt.timedelta(minutes=15),
    )
    AutonomyRule.objects.create(tool="rollback_deploy", mode="post_hoc")
    processes.web()
    worker = processes.worker()
    alice_api = api_client_for(alice)
    run = run_start(alice_api, agent="incident_copilot", input=INCIDENT)
    done = run_wait(
        alice_api,
        run["id"],
        until=is_completed,
        what="the rollback run without waiting",
        timeout=60,
        processes=processes.all,
    )
    assert done["approvals"] == []
    action = AutonomousAction.objects.get()
    assert action.tool == "rollback_deploy"
    assert action.review == AutonomousAction.Review.PENDING
    rollback = Effect.objects.get(key=action.key)
    assert rollback.approval_id is None and rollback.status == Effect.Status.SUCCEEDED

    # The sandbox now commits the roll-forward and holds its answer back: the worker dies
    # after the downstream acted and before the ledger recorded it.
    worker.kill()
    worker.start(env={"SANDBOX_EFFECT_DELAY_S": "4"})
    AutonomousAction.objects.filter(pk=action.pk).update(review=AutonomousAction.Review.UNDOING)
    async_task(UNDO_TASK, action.pk)
    poll_until(
        compensations,
        timeout=30,
        what="the roll-forward row in the sandbox",
        interval=0.05,
        processes=processes.all,
    )
    assert Effect.objects.get(key=f"{action.key}:compensate").status == Effect.Status.CLAIMED
    worker.kill()
    worker.start(env={"SANDBOX_EFFECT_DELAY_S": "0"})

    # django-q2 delivers the killed task again (after Q_RETRY); a second delivery on top of it
    # (a reviewer's double click reaching the queue twice) changes nothing either.
    async_task(UNDO_TASK, action.pk)

    def undone() -> bool:
        action.refresh_from_db()
        return action.review == AutonomousAction.Review.UNDONE

    poll_until(undone, timeout=60, what="the undo to finish", processes=processes.all)
    [forward] = compensations()
    assert forward.version == "v7" and forward.previous_version == "v6"
    assert SandboxDeploy.objects.filter(service="payments").count() == 3  # seed, back, forward
    rollback.refresh_from_db()
    assert rollback.status == Effect.Status.COMPENSATED
    compensation = Effect.objects.get(key=f"{action.key}:compensate")
    assert compensation.status == Effect.Status.SUCCEEDED
    assert compensation.compensates_id == rollback.pk
    [event] = AuditEvent.objects.filter(action="autonomy.undone")
    assert event.data["compensations"] == [f"{action.key}:compensate"]
    assert not AuditEvent.objects.filter(action="autonomy.undo_failed").exists()
