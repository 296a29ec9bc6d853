"""The blind index: finding every run that names a data subject, without storing the value."""

from __future__ import annotations

import hashlib

import pytest
from django.core.management import call_command
from django.test import override_settings

from agents.models import SubjectIndex
from agents.runtime import advance
from agents.runtime.registry import _spec_from_setting
from agents.selectors import run_history
from agents.services import run_cancel, run_fork, run_start
from agents.subjects import subject_runs, subjects_of
from approvals.models import AgentRun
from approvals.services import approval_decide
from tests.agents.erasure.conftest import refund_drive, refund_input
from tests.support.at_rest import KEY_1, KEY_2
from tests.support.scan import database_scan

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

K1 = f"k1:{KEY_1}"
K2_K1 = f"k2:{KEY_2},k1:{KEY_1}"


def _note_run_naming(email: str, alice, bob) -> AgentRun:
    """A run of the note agent, which declares no subjects: the address is only in its text."""
    run = run_start(agent="note_agent", input={"topic": f"write to {email} today"}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    approval = run.approvals.get()
    approval_decide(
        approval=approval, user=bob, decision="approve", seen_hash=approval.payload_hash
    )
    assert advance.run_advance(run_id=run.id) == "completed"
    return run


def test_erase_subject_finds_every_run_naming_the_email(note_agent, alice, bob, admin, frank):
    email = "Sam.Subject-77@Example.com"
    first = refund_drive(requester=alice, approver=bob, customer_email=email.lower())
    # Another spelling of the same address (its case): the same subject.
    second = run_start(
        agent="refund_agent", input=refund_input(customer_email=email.upper()), user=alice
    )
    step = next(s for s in run_history(run=first.run) if s["forkable"])
    fork = run_fork(run=first.run, checkpoint_id=step["checkpoint_id"], user=admin)
    undeclared = _note_run_naming(email, alice, bob)
    other = run_start(agent="refund_agent", input=refund_input(), user=alice)

    found = set(subject_runs(value=f" {email} ", kind="email"))

    assert found == {first.run.pk, second.pk, fork.pk, undeclared.pk}
    assert other.pk not in found
    assert subject_runs(value=email, kind="customer") == []  # another kind, another digest

    # The command erases those that have ended and names the ones that have not.
    for run in (second, fork):
        assert advance.run_advance(run_id=run.pk) == "waiting"
        run_cancel(run=AgentRun.objects.get(pk=run.pk), user=admin)
        advance.run_advance(run_id=run.pk)
    call_command("erase", "--subject", email, "--reason", "art. 17 request", "--by", "frank")
    erased = set(AgentRun.objects.filter(erased_at__isnull=False).values_list("pk", flat=True))
    assert erased == {first.run.pk, second.pk, fork.pk, undeclared.pk}
    assert subject_runs(value=email) == []  # their digests are gone with them
    assert AgentRun.objects.get(pk=other.pk).erased_at is None


def test_a_rotated_master_key_still_finds_old_subjects(alice):
    email = "rotated.subject@example.com"
    with override_settings(ENCRYPTION_KEYS=K1):
        run = run_start(agent="refund_agent", input=refund_input(customer_email=email), user=alice)
        (row,) = SubjectIndex.objects.filter(run=run)
        assert row.key_id == "k1"
    with override_settings(ENCRYPTION_KEYS=K2_K1):  # a new key first, the old one kept
        assert subject_runs(value=email) == [run.pk]
        newer = run_start(
            agent="refund_agent", input=refund_input(customer_email=email), user=alice
        )
        assert SubjectIndex.objects.get(run=newer).key_id == "k2"
        assert set(subject_runs(value=email)) == {run.pk, newer.pk}
    with override_settings(ENCRYPTION_KEYS=f"k2:{KEY_2}"):  # without the old key: not found
        assert subject_runs(value=email) == [newer.pk]


def test_the_index_holds_no_plaintext(alice):
    email = "index.plain-3c9@example.com"
    run = run_start(agent="refund_agent", input=refund_input(customer_email=email), user=alice)
    (row,) = SubjectIndex.objects.filter(run=run)
    found = database_scan([email, email.split("@")[0]])
    assert not [place for place in found if place.startswith("agents_subjectindex")]
    assert len(row.digest) == 64 and row.kind == "email"
    # Keyed: not the bare sha256 anyone could compute from a guess.
    guesses = {hashlib.sha256(text.encode()).hexdigest() for text in (email, f"email:{email}")}
    assert row.digest not in guesses


def test_subjects_are_the_declared_keys_and_every_email_address_in_the_input():
    run_input = {
        "customer_id": "  CUST-42 ",
        "notes": ["call back", {"cc": "Ops <OPS@Example.org>", "n": 3}],
        "plain": "no address here",
    }
    found = subjects_of(run_input, declared={"customer_id": "customer"})
    assert found == {("customer", "cust-42"), ("email", "ops@example.org")}


def test_console_agents_entries_may_declare_subjects():
    spec = _spec_from_setting(
        "mine",
        {"factory": "tests.support.agents:build_question_graph", "subjects": {"cid": "customer"}},
    )
    assert spec.subjects == {"cid": "customer"}
    with pytest.raises(ValueError, match=r'\["subjects"\] must map input keys to kinds'):
        _spec_from_setting(
            "mine", {"factory": "tests.support.agents:build_question_graph", "subjects": ["cid"]}
        )


def test_a_run_and_its_subjects_commit_together(alice, monkeypatch):
    from agents import services

    def broken(**kwargs):
        raise RuntimeError("the index write failed")

    monkeypatch.setattr(services, "subjects_write", broken)
    with pytest.raises(RuntimeError):
        run_start(agent="refund_agent", input=refund_input(), user=alice)
    assert not AgentRun.objects.exists()
