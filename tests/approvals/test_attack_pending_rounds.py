"""Attack: quorum rounds and edits that move the tier (a new round, new tier, maybe a new
expiry) through the services, then the rest of the life of those approvals: the kept pending
counts must follow each step."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine

from approvals import services as approval_services
from approvals.models import ApprovalRequest
from tests.approvals.test_rollups_pending import kept as kept  # noqa: F401 - the fixture
from tests.approvals.test_rollups_pending import live
from tests.support.approvals import decide, request_approval


@pytest.mark.django_db
def test_rounds_and_tier_moving_edits_keep_the_counts_right(
    demo_policy,
    alice,
    bob,
    carol,
    kept,  # noqa: F811 - the fixture
):
    big = request_approval(
        requester=alice, tier="critical", args={"order_id": "A-1", "amount": 900}
    )
    small = request_approval(requester=alice, tier="write", args={"order_id": "A-2", "amount": 5})
    decide(big, bob)  # one vote of two
    assert kept() == live()
    moved = decide(big, carol, decision="edit", args={"order_id": "A-1", "amount": 3})
    assert kept() == live()
    raised = decide(small, carol, decision="edit", args={"order_id": "A-2", "amount": 5000})
    assert (raised.status, raised.tier, raised.quorum_round) == ("pending", "critical", 1)
    assert kept() == live()
    if moved.status == ApprovalRequest.Status.PENDING:
        decide(moved, bob)
    assert kept() == live()
    with time_machine.travel(dt.datetime.now(dt.UTC) + dt.timedelta(days=3)):
        approval_services.approvals_sweep()
    assert kept() == live()
