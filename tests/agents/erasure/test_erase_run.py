"""Erasure of a run: what it removes, what it records, what it refuses, and the crash between
its two steps."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from agents import erasure as erasure_module
from agents import tasks
from agents.erasure import ErasureRefused, erasures_resume, runs_erase
from agents.models import Effect, Erasure, RunStartKey, SandboxNotification, SandboxPayment
from agents.runtime import advance
from agents.runtime.checkpoint import checkpointer_get, thread_config
from agents.selectors import run_history
from agents.services import run_cancel, run_fork, run_start
from approvals.models import AgentRun
from audit.models import AuditEvent
from audit.verify import chain_verify_db
from core.models import DataKey
from tests.agents.erasure.conftest import Driven, refund_drive, refund_input
from tests.support.scan import database_scan, tables_of

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

REASON = "data subject request, ticket 4411"
# The sandbox systems stand in for external systems: they keep what they were sent (in
# plaintext, as a real payment provider would) until erasure deletes the run's rows.
SANDBOX = {"agents_sandboxinventorymovement", "agents_sandboxnotification", "agents_sandboxpayment"}


def _erase(driven: Driven, user) -> erasure_module.ErasureOutcome:
    return runs_erase(runs=[driven.run], user=user, reason=REASON)


def _checkpoint(run: AgentRun):
    return checkpointer_get().get_tuple(thread_config(run))


def test_the_scan_finds_a_run_s_strings_before_erasure(driven):
    """The control of the scans below: it finds the input's strings where they are stored in
    the clear, which is only in the sandbox systems: the console's own tables hold them sealed,
    the checkpoints encrypted."""
    found = database_scan(driven.secrets)
    assert tables_of(found) == SANDBOX, found
    assert _checkpoint(driven.run) is not None


def test_erase_run_leaves_no_plaintext_anywhere_in_the_database(driven, frank):
    _erase(driven, frank)
    found = database_scan(driven.secrets)
    assert found == {}, f"plaintext left in {sorted(found)}"


def test_erasure_deletes_the_checkpoints_and_the_sandbox_rows(driven, frank):
    _erase(driven, frank)
    assert _checkpoint(driven.run) is None  # every checkpoint of the thread is deleted
    prefix = f"{driven.run.thread_id}:"
    assert not SandboxPayment.objects.filter(idempotency_key__startswith=prefix).exists()
    assert not SandboxNotification.objects.filter(idempotency_key__startswith=prefix).exists()


def test_erasure_destroys_the_key_and_marks_the_run(driven, frank):
    outcome = _erase(driven, frank)
    run = AgentRun.objects.get(pk=driven.run.pk)
    assert run.erased_at is not None
    key = DataKey.objects.get(run_id=run.pk)
    assert key.wrapped is None and key.destroyed_at is not None
    (erasure,) = outcome.erasures
    assert erasure.status == Erasure.Status.COMPLETED and erasure.completed_at is not None
    assert erasure.run_ids == [str(run.pk)] and erasure.user == frank
    assert outcome.erased == [str(run.pk)]
    again = _erase(driven, frank)  # a second erasure skips what is erased
    assert again.erased == [] and again.skipped == [str(run.pk)]


def test_audit_verify_passes_after_erasure(driven, frank, capsys):
    _erase(driven, frank)
    result = chain_verify_db()
    assert result.ok, result.reason
    assert result.count == AuditEvent.objects.count()
    call_command("audit_verify")  # exits non-zero when the chain is broken


def test_erasure_performed_names_who_why_and_runs_but_no_data(driven, frank):
    outcome = _erase(driven, frank)
    event = AuditEvent.objects.get(action="erasure.performed")
    assert event.actor_username == "frank" and event.actor_user_id == frank.pk
    assert event.data == {
        "erasure_id": outcome.erasures[0].pk,
        "runs": [str(driven.run.pk)],
        "reason": REASON,
        "kind": "run",
        "legacy_values": 0,
        "legacy_events": 0,
    }
    assert not any(secret in event.canonical for secret in driven.secrets)
    completed = AuditEvent.objects.get(action="erasure.completed")
    assert completed.data == {"erasure_id": outcome.erasures[0].pk, "runs": [str(driven.run.pk)]}
    assert completed.seq > event.seq


def test_erasure_refuses_a_run_with_an_effect_in_doubt(driven, frank):
    effect = Effect.objects.filter(run=driven.run).order_by("id").last()
    Effect.objects.filter(pk=effect.pk).update(status=Effect.Status.IN_DOUBT)
    with pytest.raises(ErasureRefused) as refused:
        _erase(driven, frank)
    assert refused.value.status_code == 409
    assert f"effect {effect.key} is in_doubt" in refused.value.refusals[str(driven.run.pk)]
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is None
    assert DataKey.objects.filter(run_id=driven.run.pk, destroyed_at__isnull=False).count() == 0
    assert not Erasure.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="erasure.").exists()
    assert _checkpoint(driven.run) is not None


def test_erasure_refuses_a_run_that_has_not_ended(note_agent, alice, frank):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    with pytest.raises(ErasureRefused) as refused:
        runs_erase(runs=[run], user=frank, reason=REASON)
    assert "it is waiting: cancel it" in refused.value.refusals[str(run.pk)]
    run_cancel(run=AgentRun.objects.get(pk=run.pk), user=alice)
    with pytest.raises(ErasureRefused) as refused:  # its compensating advance is still queued
        runs_erase(runs=[run], user=frank, reason=REASON)
    assert "an advance is queued" in refused.value.refusals[str(run.pk)]
    assert advance.run_advance(run_id=run.id).startswith("cancelled")
    assert runs_erase(runs=[run], user=frank, reason=REASON).erased == [str(run.pk)]


def test_an_erased_run_is_never_advanced(driven, frank):
    before = AgentRun.objects.get(pk=driven.run.pk)
    _erase(driven, frank)
    events = AuditEvent.objects.count()
    # Without checkpoints LangGraph would start the thread again from START.
    assert advance.run_advance(run_id=driven.run.pk) == "erased"
    assert tasks.run_advance(str(driven.run.pk)) == "erased"
    after = AgentRun.objects.get(pk=driven.run.pk)
    assert (after.lease_epoch, after.lease_owner, after.status) == (
        before.lease_epoch,
        "",
        AgentRun.Status.COMPLETED,
    )
    assert _checkpoint(driven.run) is None
    assert AuditEvent.objects.count() == events
    assert run_cancel(run=after, user=frank).status == AgentRun.Status.COMPLETED  # a no-op
    assert not AuditEvent.objects.filter(action="run.cancelled").exists()


def test_a_crash_between_keys_and_checkpoints_is_finished_by_the_sweep(driven, frank, monkeypatch):
    def killed(erasure):
        raise SystemExit("worker killed between the two steps")

    monkeypatch.setattr(erasure_module, "erasure_complete", killed)
    with pytest.raises(SystemExit):
        _erase(driven, frank)
    monkeypatch.undo()
    erasure = Erasure.objects.get()
    assert erasure.status == Erasure.Status.KEYS_DESTROYED
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is not None
    assert _checkpoint(driven.run) is not None  # left for the sweep
    assert not AuditEvent.objects.filter(action="erasure.completed").exists()
    # Meanwhile nothing advances it.
    assert advance.run_advance(run_id=driven.run.pk) == "erased"

    tasks.runs_recover()  # the every-minute sweep

    erasure.refresh_from_db()
    assert erasure.status == Erasure.Status.COMPLETED
    assert _checkpoint(driven.run) is None
    assert AuditEvent.objects.filter(action="erasure.completed").count() == 1
    assert erasures_resume() == 0  # nothing left; completed once
    assert AuditEvent.objects.filter(action="erasure.completed").count() == 1


def test_erase_resume_completes_an_interrupted_erasure(driven, frank, monkeypatch, capsys):
    monkeypatch.setattr(erasure_module, "erasure_complete", lambda erasure: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        _erase(driven, frank)
    monkeypatch.undo()
    call_command("erase", "--resume")
    assert "1 interrupted erasure(s) completed" in capsys.readouterr().out
    assert Erasure.objects.get().status == Erasure.Status.COMPLETED
    assert _checkpoint(driven.run) is None


def test_erasure_keeps_the_run_s_idempotency_key_without_its_hash(alice, bob, frank):
    from agents.services import IdempotencyErased, run_start_idempotent

    body = refund_input()
    run, _ = run_start_idempotent(key="k-erase-1", agent="refund_agent", input=body, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    run_cancel(run=AgentRun.objects.get(pk=run.pk), user=alice)
    advance.run_advance(run_id=run.id)
    runs_erase(runs=[run], user=frank, reason=REASON)
    # The hash of the body is gone (it would confirm a guessed input); the key holds: a retry
    # of the same request answers 410, never a second run.
    assert RunStartKey.objects.get(run=run).request_hash == ""
    with pytest.raises(IdempotencyErased):
        run_start_idempotent(key="k-erase-1", agent="refund_agent", input=body, user=alice)
    assert AgentRun.objects.filter(requested_by=alice).count() == 1


def test_erasing_a_run_erases_its_forks(alice, bob, frank, admin):
    driven = refund_drive(requester=alice, approver=bob)
    first = next(step for step in run_history(run=driven.run) if step["forkable"])
    fork = run_fork(run=driven.run, checkpoint_id=first["checkpoint_id"], user=admin)
    assert advance.run_advance(run_id=fork.pk) == "waiting"
    run_cancel(run=AgentRun.objects.get(pk=fork.pk), user=admin)
    advance.run_advance(run_id=fork.pk)
    outcome = _erase(driven, frank)
    assert set(outcome.erased) == {str(driven.run.pk), str(fork.pk)}
    assert AgentRun.objects.get(pk=fork.pk).erased_at is not None
    assert _checkpoint(fork) is None
