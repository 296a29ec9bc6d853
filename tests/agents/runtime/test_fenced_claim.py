"""The ledger's claim is fenced in its own INSERT: no read of the run before it, and a worker
that lost its lease (or a cancelled run) claims nothing (invariants 1, 6, 13 and 14)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from agents.effects import ledger
from agents.effects.claim import effect_insert_fenced
from agents.effects.errors import LeaseNotHeld, RunCancelled
from agents.models import Effect
from agents.runtime import lease
from agents.services import run_start
from approvals.models import AgentRun
from audit.models import AuditEvent
from audit.verify import chain_verify_db
from core.sealing import datakey_create, datakey_scope

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def calls():
    from pydantic import BaseModel

    from agents.tools import ToolSpec, tool_register

    made: list[str] = []

    class TextArgs(BaseModel):
        text: str

    def write(args, key):
        made.append(key)
        return {"ok": True}

    tool_register(
        ToolSpec(name="claim_write", description="w", args_model=TextArgs, tier="write", run=write)
    )
    return made


@pytest.fixture
def run(note_agent, alice):
    return run_start(agent="note_agent", input={"topic": "disk"}, user=alice)


def _execute(run, key="k"):
    return ledger.effect_execute(
        run_id=str(run.id), key=f"{run.id}:{key}", tool="claim_write", args={"text": "a"}
    )


def test_an_effect_is_claimed_and_settled_in_two_transactions_without_reading_the_run(
    run, calls, monkeypatch, django_assert_num_queries
):
    lease.lease_acquire(run_id=run.id, owner="worker-1")
    monkeypatch.setattr(ledger, "_lease_owner", lambda: "worker-1")
    # An advance seals in its key scope, where the run's data key is read once (here: made
    # first); the args and result it seals cost no query of their own.
    with datakey_scope():
        datakey_create(run.id)
        # BEGIN, the autonomous action's review state (locked: an effect no person approved
        # is refused once its undo was asked, agents/effects/undone.py), the fenced INSERT, its
        # event, COMMIT; the call; BEGIN, UPDATE, its event, COMMIT.
        with django_assert_num_queries(9):
            assert _execute(run) == {"ok": True}
    assert calls == [f"{run.id}:k"]
    assert Effect.objects.get(key=f"{run.id}:k").status == "succeeded"
    assert chain_verify_db().ok


def test_a_worker_that_lost_the_lease_claims_nothing(run, calls, monkeypatch):
    lease.lease_acquire(run_id=run.id, owner="worker-2")
    monkeypatch.setattr(ledger, "_lease_owner", lambda: "worker-1")
    events = AuditEvent.objects.count()
    with pytest.raises(LeaseNotHeld):
        _execute(run)
    assert calls == []
    assert not Effect.objects.exists()
    assert AuditEvent.objects.count() == events


def test_a_lease_past_its_expiry_claims_nothing(run, calls, monkeypatch):
    lease.lease_acquire(run_id=run.id, owner="worker-1")
    AgentRun.objects.filter(pk=run.pk).update(
        lease_expires_at=timezone.now() - dt.timedelta(seconds=1)
    )
    monkeypatch.setattr(ledger, "_lease_owner", lambda: "worker-1")
    with pytest.raises(LeaseNotHeld):
        _execute(run)
    assert calls == []
    assert not Effect.objects.exists()


def test_a_cancelled_run_claims_nothing_but_a_compensation_still_may(run, calls):
    AgentRun.objects.filter(pk=run.pk).update(cancel_requested=True)
    with pytest.raises(RunCancelled):
        _execute(run)
    assert calls == []
    assert not Effect.objects.exists()
    undo = Effect(key=f"{run.id}:undo", run_id=run.id, tool="claim_write", args_fingerprint="f")
    assert not effect_insert_fenced(undo, owner=None, compensating=False, now=timezone.now())
    assert effect_insert_fenced(undo, owner=None, compensating=True, now=timezone.now())
    stored = Effect.objects.get(pk=undo.pk)
    assert (stored.key, stored.status, stored.args, stored.result) == (
        f"{run.id}:undo",
        "claimed",
        {},
        {},
    )
    assert stored.created_at is not None and stored.updated_at is not None
