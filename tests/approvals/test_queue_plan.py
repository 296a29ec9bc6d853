"""The reviewer's queue reads one page in index order, however many approvals are pending."""

from __future__ import annotations

import pytest

from approvals.selectors import approval_list_pending
from tests.support.factories import ApprovalFactory, RunFactory

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("mine", [True, False])
def test_the_pending_queue_joins_no_decider(alice, bob, mine):
    """A pending approval has no decider. Joining auth_user for one (a LEFT JOIN, planned as a
    hash join) cost the index order: at 1M approvals Postgres read and sorted all 1,609 pending
    rows for a page of 26 (23 ms; about ten times that at 10M), instead of stopping early."""
    ApprovalFactory(run=RunFactory(requested_by=alice))

    sql = str(approval_list_pending(user=bob, mine=mine)[:26].query)

    assert "LEFT OUTER JOIN" not in sql
    assert 'JOIN "auth_user" T' not in sql  # the requester's is the only auth_user joined


def test_the_pending_queue_still_shows_each_approval_with_its_requester(
    alice, bob, django_assert_num_queries
):
    run = RunFactory(requested_by=alice)
    approvals = [ApprovalFactory(run=run) for _ in range(3)]

    queue = approval_list_pending(user=bob, mine=False)  # reads bob's tiers

    # The page, and the data keys of its runs in one more query (their args and payloads are
    # sealed; core/sealed_query.py): two however many approvals and runs it holds.
    with django_assert_num_queries(2):
        rows = list(queue)
        assert [row.run.requested_by.username for row in rows] == ["alice"] * 3
        assert [row.decided_by for row in rows] == [None] * 3

    assert {row.pk for row in rows} == {approval.pk for approval in approvals}
