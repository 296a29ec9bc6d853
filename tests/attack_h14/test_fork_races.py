"""Hostile review (issue 14): a fork made around an erasure outlives it with the erased
run's personal data, readable under a key of its own."""

from __future__ import annotations

import contextlib

import pytest

from agents import erasure as erasure_module
from agents.erasure import ErasureRefused, runs_erase
from agents.selectors import run_history
from agents.services import ForkRefused, run_fork
from approvals.models import AgentRun
from tests.support.scan import database_scan

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

REASON = "subject request 77"


def _forkable(run: AgentRun) -> str:
    return next(step for step in run_history(run=run) if step["forkable"])["checkpoint_id"]


def test_a_fork_from_a_run_read_before_its_erasure_is_refused(driven, frank, admin, monkeypatch):
    """The fork page reads the run, then an erasure commits its keys (its checkpoints go a
    moment later, or at the next sweep after a crash), then the fork goes on: run_fork checks
    ``erased_at`` on the object it was given, never under a lock, and copies ``run.input``,
    the plaintext it opened before the erasure, into a new run under a new key."""
    stale = AgentRun.objects.get(pk=driven.run.pk)
    assert stale.input["customer_email"] == driven.email  # the page opened it
    checkpoint_id = _forkable(stale)
    # Erasure's step A commits; step B (checkpoints) has not run yet.
    monkeypatch.setattr(erasure_module, "erasure_complete", lambda erasure: False)
    runs_erase(runs=[driven.run], user=frank, reason=REASON)
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is not None

    child = None
    with contextlib.suppress(ForkRefused):
        child = run_fork(run=stale, checkpoint_id=checkpoint_id, user=admin)
    survivors = AgentRun.objects.filter(parent_run_id=driven.run.pk, erased_at__isnull=True)
    readable = [run.input.get("customer_email") for run in survivors]
    assert child is None and not readable, (
        f"a fork of the erased run was made and reads its subject: {readable}"
    )


def test_a_fork_made_while_an_erasure_resolves_is_erased_or_refused(
    driven, frank, admin, monkeypatch
):
    """runs_erase resolves the forks before its transaction and never again: a fork made in
    between (a reviewer's click) is neither erased nor a reason to refuse. The erased run's
    subject lives on in it, and the subject index even names it."""
    checkpoint_id = _forkable(driven.run)
    real = erasure_module.runs_refusals
    made: list[AgentRun] = []

    def refusals_then_fork(runs):
        if not made:  # after the resolve, before transaction A
            made.append(
                run_fork(
                    run=AgentRun.objects.get(pk=driven.run.pk),
                    checkpoint_id=checkpoint_id,
                    user=admin,
                )
            )
        return real(runs)

    monkeypatch.setattr(erasure_module, "runs_refusals", refusals_then_fork)
    try:
        runs_erase(runs=[driven.run], user=frank, reason=REASON)
    except ErasureRefused:
        return  # held: the fork was seen under the lock
    monkeypatch.undo()
    assert made
    fork = AgentRun.objects.get(pk=made[0].pk)
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is not None
    leftover = database_scan([driven.email])
    assert fork.erased_at is not None and fork.input.get("customer_email") != driven.email, (
        f"the erased run's fork {fork.pk} survives with its data; plaintext at {leftover}"
    )
