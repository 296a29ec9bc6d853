"""Hostile review (issue 14): paths the erasure suite's scan does not drive (an edit, a
reviewer's message and note, a rejection, a failure, an Idempotency-Key) leave no plaintext
once the run is erased."""

from __future__ import annotations

import uuid

import pytest

from agents.erasure import runs_erase
from agents.runtime import advance
from agents.services import run_start, run_start_idempotent
from approvals.models import AgentRun
from approvals.services import approval_decide
from tests.support.scan import database_scan

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

REASON = "subject request 88"


def _tag() -> str:
    return uuid.uuid4().hex[:12]


@pytest.mark.parametrize("decision", ["edit", "reject"])
def test_an_edited_or_rejected_note_run_leaves_no_plaintext_once_erased(
    note_agent, alice, admin, frank, decision
):
    topic, text, message, note = (f"{k}-{_tag()}" for k in ("topic", "text", "msg", "note"))
    run = run_start(agent="note_agent", input={"topic": topic}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    extra = {"args": {"text": text, "count": 2}} if decision == "edit" else {}
    approval_decide(
        approval=approval,
        user=admin,
        decision=decision,
        seen_hash=approval.payload_hash,
        message=message,
        note=note,
        **extra,
    )
    advance.run_advance(run_id=run.id)
    run = AgentRun.objects.get(pk=run.pk)
    assert run.is_terminal, run.status
    secrets = [topic, message, note] + ([text] if decision == "edit" else [])
    assert database_scan(secrets) == {}  # sealed from the start
    runs_erase(runs=[run], user=frank, reason=REASON)
    assert database_scan(secrets) == {}


def test_a_run_started_with_an_idempotency_key_leaves_no_plaintext_once_erased(
    note_agent, alice, admin, frank
):
    topic, key = f"topic-{_tag()}", f"idem-{_tag()}"
    run, _ = run_start_idempotent(key=key, agent="note_agent", input={"topic": topic}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    approval_decide(
        approval=approval, user=admin, decision="reject", seen_hash=approval.payload_hash
    )
    advance.run_advance(run_id=run.id)
    runs_erase(runs=[AgentRun.objects.get(pk=run.pk)], user=frank, reason=REASON)
    assert database_scan([topic]) == {}


def test_a_retry_with_the_idempotency_key_of_an_erased_run_starts_no_second_run(
    note_agent, alice, admin, frank
):
    """Erasure deletes the run's RunStartKey (its request_hash is an oracle): a client that
    retries the same POST with the same Idempotency-Key now gets a brand-new run, which acts
    again (the key's promise: same key + same body -> the same run)."""
    body, key = {"topic": f"topic-{_tag()}"}, f"idem-{_tag()}"
    run, created = run_start_idempotent(key=key, agent="note_agent", input=body, user=alice)
    assert created
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    approval_decide(
        approval=approval, user=admin, decision="reject", seen_hash=approval.payload_hash
    )
    advance.run_advance(run_id=run.id)
    runs_erase(runs=[AgentRun.objects.get(pk=run.pk)], user=frank, reason=REASON)
    try:
        again, created = run_start_idempotent(key=key, agent="note_agent", input=body, user=alice)
    except Exception:  # noqa: BLE001 - a refusal (409/410/422) is a fine answer
        return
    assert not created and again.pk == run.pk, "the erased run's key started a second run"
