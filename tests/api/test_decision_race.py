"""Twenty reviewers press approve on the same approval at the same moment (invariant 5)."""

from __future__ import annotations

import threading
from collections import Counter

from django.db import connection

from approvals.models import ApprovalRequest
from audit.models import AuditEvent

from .conftest import ApprovalFactory, RunFactory, approver, client_for, tasks_named

REVIEWERS = 20


def test_twenty_simultaneous_decisions_yield_one_200_and_nineteen_409s(transactional_db, queued):
    requester = approver("requester")
    approval = ApprovalFactory(run=RunFactory(requested_by=requester))
    clients = [client_for(approver(f"reviewer{n}")) for n in range(REVIEWERS)]
    barrier = threading.Barrier(REVIEWERS)
    statuses: list[int] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def press_approve(client) -> None:
        try:
            barrier.wait(timeout=30)
            response = client.post(
                f"/api/approvals/{approval.id}/decision/",
                {"decision": "approve", "payload_hash": approval.payload_hash},
                format="json",
            )
            with lock:
                statuses.append(response.status_code)
        except BaseException as exc:  # surfaced below with the thread's own error
            with lock:
                failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=press_approve, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)

    assert failures == []
    assert Counter(statuses) == {200: 1, 409: REVIEWERS - 1}
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.APPROVED
    assert tasks_named(queued, "agents.tasks.run_advance") == [
        ("agents.tasks.run_advance", str(approval.run_id))
    ]
    decided = AuditEvent.objects.filter(action="approval.decided", approval_id=approval.id)
    assert decided.count() == 1
    assert decided.get().actor_username == approval.decided_by_label
