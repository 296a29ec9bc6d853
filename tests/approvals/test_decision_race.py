"""Twenty reviewers press approve on the same approval at the same moment (invariant 5)."""

from __future__ import annotations

import threading
from collections import Counter

from django.db import connection

from approvals.models import ApprovalRequest
from audit.models import AuditEvent
from tests.support.people import DECIDE, person, rest_client_for
from tests.support.probes import ProbeApprovalFactory, ProbeRunFactory
from tests.support.queue import tasks_named

REVIEWERS = 20


def test_twenty_simultaneous_decisions_yield_one_200_and_nineteen_409s(transactional_db, queued):
    requester = person("requester", perms=[DECIDE])
    approval = ProbeApprovalFactory(run=ProbeRunFactory(requested_by=requester))
    clients = [rest_client_for(person(f"reviewer{n}", perms=[DECIDE])) for n in range(REVIEWERS)]
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
