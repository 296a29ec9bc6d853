"""Hostile review (issue 14): erasure of a cancelled run whose applied effects are not
compensated yet (its compensation failed, or the worker compensating it died and its lease
lapsed) makes the undo impossible for good: run_compensate skips erased runs."""

from __future__ import annotations

import pytest

from agents.effects.compensation import run_compensate
from agents.erasure import ErasureRefused, runs_erase
from agents.models import Effect
from approvals.models import AgentRun

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]


def test_a_cancelled_run_with_effects_still_to_compensate_is_not_erased(driven, frank):
    run = driven.run
    applied = Effect.objects.filter(run=run, status=Effect.Status.SUCCEEDED).count()
    assert applied  # a refund, a restock, a notification
    # The cancel landed while the advance ran these effects; the compensation that followed
    # failed downstream (escalated, "not yet"), or its worker died: nothing holds the run now.
    AgentRun.objects.filter(pk=run.pk).update(
        status=AgentRun.Status.CANCELLED,
        cancel_requested=True,
        lease_owner="",
        lease_expires_at=None,
        wake_requested=False,
    )
    try:
        runs_erase(runs=[run], user=frank, reason="subject request 9")
    except ErasureRefused:
        return  # held
    # Erased: the refund can no longer be undone by anyone.
    assert run_compensate(run_id=str(run.pk)) == []
    left = Effect.objects.filter(run=run, status=Effect.Status.SUCCEEDED).count()
    assert left == 0, f"{left} applied effect(s) of a cancelled run will never be compensated"
