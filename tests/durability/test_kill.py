"""A run survives SIGKILL of its worker and of the web server, and applies its effect once."""

from __future__ import annotations

from collections import Counter

import pytest

from agents.models import Effect, SandboxNotification, SandboxTicket
from tests.support.processes import poll_until
from tests.support.runs import (
    approval_approve,
    is_completed,
    is_waiting_for_a_person,
    pending_approvals,
    run_start,
    run_wait,
)

pytestmark = [
    pytest.mark.durability,
    pytest.mark.django_db(transaction=True),
]

INCIDENT = {"service": "payments", "signal": "error rate 12%", "severity": "sev3"}


def effect_tools() -> Counter[str]:
    return Counter(Effect.objects.values_list("tool", flat=True))


def test_waiting_run_completes_after_worker_and_web_server_are_killed(
    processes, api_client_for, alice, bob
):
    web = processes.web()
    worker = processes.worker()
    alice_api = api_client_for(alice)
    run = run_start(alice_api, agent="incident_copilot", input=INCIDENT)
    waiting = run_wait(
        alice_api,
        run["id"],
        until=is_waiting_for_a_person,
        what="a pending approval",
        timeout=60,
        processes=processes.all,
    )
    [approval] = pending_approvals(waiting)
    assert approval["tool"] == "create_incident_ticket"

    worker.kill()
    web.kill()
    web.start()
    worker.start()
    approval_approve(api_client_for(bob), approval)

    done = run_wait(
        alice_api,
        run["id"],
        until=is_completed,
        what="completion",
        timeout=60,
        processes=processes.all,
    )
    assert [a["status"] for a in done["approvals"]] == ["approved"]
    assert SandboxTicket.objects.count() == 1
    assert SandboxNotification.objects.count() == 1
    assert effect_tools() == Counter({"create_incident_ticket": 1, "notify_channel": 1})
    assert {e["status"] for e in done["effects"]} == {"succeeded"}


def test_worker_killed_after_the_ticket_is_written_does_not_write_it_twice(
    processes, api_client_for, alice, bob
):
    processes.web()
    worker = processes.worker(sandbox_delay_s=5)
    alice_api = api_client_for(alice)
    run = run_start(alice_api, agent="incident_copilot", input=INCIDENT)
    waiting = run_wait(
        alice_api,
        run["id"],
        until=is_waiting_for_a_person,
        what="a pending approval",
        timeout=60,
        processes=processes.all,
    )
    [approval] = pending_approvals(waiting)

    approval_approve(api_client_for(bob), approval)
    # The sandbox has committed the ticket and now holds its answer back: the ledger has not
    # recorded the result yet when the worker dies.
    poll_until(
        lambda: SandboxTicket.objects.exists(),
        timeout=30,
        what="the sandbox ticket row",
        interval=0.05,
        processes=processes.all,
    )
    assert Effect.objects.get(tool="create_incident_ticket").status == Effect.Status.CLAIMED
    worker.kill()
    worker.start(env={"SANDBOX_EFFECT_DELAY_S": "0"})

    done = run_wait(
        alice_api,
        run["id"],
        until=is_completed,
        what="completion after the kill",
        timeout=90,
        processes=processes.all,
    )
    assert SandboxTicket.objects.count() == 1
    assert effect_tools() == Counter({"create_incident_ticket": 1, "notify_channel": 1})
    ticket_effect = Effect.objects.get(tool="create_incident_ticket")
    assert ticket_effect.status == Effect.Status.SUCCEEDED
    assert ticket_effect.result["ticket_id"] == SandboxTicket.objects.get().pk
    assert {e["status"] for e in done["effects"]} == {"succeeded"}
