"""Two reviewers press "Claim" on the same approval at the same moment: one claim wins."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from django.contrib.auth.models import Group
from django.db import connection

from approvals.models import ApprovalClaim
from approvals.services import policy_seed_demo
from audit.models import AuditEvent
from tests.support.factories import ApprovalFactory, RunFactory
from tests.support.people import person, rest_client_for


@pytest.mark.parametrize("lapsed_row", [False, True], ids=["first claim", "lapsed claim"])
def test_two_simultaneous_claims_yield_one_200_and_one_409(transactional_db, lapsed_row):
    """The first claim races on the unique insert; a lapsed row's on the conditional UPDATE
    (Postgres re-checks the row's WHERE after the first writer commits)."""
    policy_seed_demo()
    writers = Group.objects.get(name="approvers-write")
    approval = ApprovalFactory(run=RunFactory(requested_by=person("alice")), tier="write")
    reviewers = [person(name, groups=[writers]) for name in ("bob", "carol")]
    if lapsed_row:
        earlier = approval.created_at
        ApprovalClaim.objects.create(
            approval=approval, user=person("gone", groups=[writers]), since=earlier, until=earlier
        )
    barrier = threading.Barrier(len(reviewers))
    statuses: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def press_claim(user) -> None:
        try:
            client = rest_client_for(user)
            barrier.wait(timeout=30)
            response = client.post(f"/api/approvals/{approval.pk}/claim/")
            with lock:
                statuses.append(response.status_code)
        except BaseException as exc:  # surfaced below
            with lock:
                failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=press_claim, args=(u,)) for u in reviewers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert failures == []
    assert Counter(statuses) == {200: 1, 409: 1}
    claim = ApprovalClaim.objects.get(approval=approval)
    claimed = AuditEvent.objects.get(action="approval.claimed", approval_id=approval.pk)
    assert claimed.actor_username == claim.user.username in ("bob", "carol")
