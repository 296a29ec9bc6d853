"""The ledger compares approved args with the args about to run in the audit's canonical form
(RFC 8785): what jsonb gives back for a number (Postgres reads 1.0 as 1 and 1e21 as an
integer) is the same value, not "other args"."""

from __future__ import annotations

import pytest

from agents.effects.authorize import _check_approved_args
from agents.effects.errors import EffectArgsMismatch
from tests.support.factories import ApprovalFactory, RunFactory

pytestmark = pytest.mark.django_db

ARGS = {"amount": 1.0, "units": 1e21, "rate": -0.0, "note": "x"}


def test_args_that_jsonb_rewrote_still_match_what_was_approved():
    approval = ApprovalFactory(run=RunFactory(), status="approved", tool="mystery", args=ARGS)
    _check_approved_args(approval_id=approval.pk, args=dict(ARGS))


def test_other_args_are_still_refused():
    approval = ApprovalFactory(run=RunFactory(), status="approved", tool="mystery", args=ARGS)
    with pytest.raises(EffectArgsMismatch):
        _check_approved_args(approval_id=approval.pk, args={**ARGS, "amount": 2.0})


def test_an_order_id_beyond_2_53_that_differs_from_the_approved_one_is_refused():
    # Integers are exact in jsonb and in the checkpoint; RFC 8785's doubles are 256 apart at
    # this size, so comparing their texts took the order next door for the approved one.
    approved = {"order_id": 2**60, "amount": 10}  # a double equals it: it may be approved
    approval = ApprovalFactory(run=RunFactory(), status="approved", tool="mystery", args=approved)
    with pytest.raises(EffectArgsMismatch):
        _check_approved_args(approval_id=approval.pk, args={**approved, "order_id": 2**60 + 1})
