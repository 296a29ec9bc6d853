"""An agent that runs in its own service (examples/remote_agent, a separate process with its
own SQLite checkpointer) governed by the console through the Python client: bob decides in a
real browser, the signed callback resumes the agent, the refund is paid once under the
console's idempotency key and its outcome comes back. And the long-poll path, with no
callback at all."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from approval_console_client import ConsoleClient
from approval_console_client.middleware import pending_request_ids, resume_when_decided
from django.contrib.auth.models import Group
from playwright.sync_api import expect

from agents.remote.models import ExternalAgent, RemoteRequest
from agents.remote.registry import external_agent_key_issue, external_agent_save
from approvals.models import AgentRun, ApprovalRequest, Notification
from approvals.services import policy_seed_demo
from audit.canonical import canonical_hash
from audit.models import AuditEvent
from examples.remote_agent.agent import agent_build
from examples.remote_agent.payments import Payments
from tests.support.fixtures import ProcessSet
from tests.support.processes import (
    ManagedProcess,
    free_port,
    logs_section,
    poll_until,
    wait_http_ready,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ASK = "Refund 1250 cents for order A-1001"
ARGS = {"order_id": "A-1001", "amount_cents": 1250}


def policy_with_bob(bob: Any) -> None:
    """The demo tiers; bob approves tier "write" (refunds are "write" in the demo policy)."""
    policy_seed_demo()
    bob.groups.add(Group.objects.get(name="approvers-write"))


def agent_register(*, callback_url: str = "") -> tuple[ExternalAgent, str]:
    """The agent as an admin registers it: may ask about refund_issue; a key issued once."""
    agent = external_agent_save(
        agent=ExternalAgent(name="refunds", tools=["refund_issue"], callback_url=callback_url),
        actor="system:test",
    )
    return agent, external_agent_key_issue(agent=agent, actor="system:test")[1]


def agent_process(
    processes: ProcessSet, tmp_path: Path, *, web_url: str, key: str, secret: str, port: int
) -> ManagedProcess:
    """``python -m examples.remote_agent`` with only its own settings (no Django ones), one of
    the test's processes (killed with them at teardown)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "DJANGO", "DATABASE_URL"))
    }
    env.update(
        CONSOLE_URL=web_url,
        CONSOLE_AGENT_KEY=key,
        CONSOLE_CALLBACK_SECRET=secret,
        PORT=str(port),
        DATA_DIR=str(tmp_path / "agent-data"),
        PYTHONUNBUFFERED="1",
    )
    process = ManagedProcess(
        name="remote_agent",
        command=[sys.executable, "-m", "examples.remote_agent"],
        env=env,
        log_path=processes.log_dir / "remote_agent.log",
    )
    processes.workers[process.name] = process
    process.start()
    wait_http_ready(f"http://127.0.0.1:{port}/health", timeout=30, process=process)
    return process


def effect_reported(approval_id: int) -> AuditEvent | None:
    return AuditEvent.objects.filter(action="effect.reported", approval_id=approval_id).first()


def test_bob_approves_a_remote_agents_refund_in_the_browser_and_it_is_paid_once(
    log_in, web_url, processes, tmp_path, alice, bob
):
    policy_with_bob(bob)
    port = free_port()
    agent, key = agent_register(callback_url=f"http://127.0.0.1:{port}/callbacks/console")
    remote_agent = agent_process(
        processes, tmp_path, web_url=web_url, key=key, secret=agent.callback_secret, port=port
    )
    everyone = processes.all
    assert remote_agent in everyone
    agent_http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30)

    started = agent_http.post("/runs", json={"input": ASK})
    assert started.status_code == 201, (started.text, logs_section(everyone))
    thread = started.json()["thread_id"]
    (request_id,) = started.json()["console_request_ids"]
    remote = RemoteRequest.objects.get(pk=request_id)
    assert (remote.agent_id, remote.thread_id, remote.status) == (agent.pk, thread, "pending")
    (approval,) = ApprovalRequest.objects.filter(run=remote.run)
    assert (approval.tool, approval.tier, approval.args) == ("refund_issue", "write", ARGS)
    assert remote.run.agent == "external:refunds"
    assert remote.run.requested_by_id == agent.user_id

    bob_browser = log_in(bob)
    page = bob_browser.page
    link = f'#queue-table a.row-link[href="/approvals/{approval.pk}/"]'
    expect(page.locator(link)).to_be_visible()
    page.click(link)
    expect(page.locator("h1 code")).to_have_text("refund_issue")
    expect(page.locator("table.args")).to_contain_text("A-1001")
    bob_browser.screenshot("remote-approval.png")
    page.click("#decide-approve button[type=submit]")
    page.wait_for_url(f"{web_url}/")

    def agent_done() -> dict[str, Any] | None:
        state = agent_http.get(f"/runs/{thread}").json()
        assert state["status"] != "failed", state
        return state if state["status"] == "completed" else None

    state = poll_until(agent_done, timeout=60, what="the agent to complete", processes=everyone)
    # It was the signed callback that resumed it: one delivered, to the registered URL.
    callbacks = Notification.objects.filter(event=Notification.Event.CALLBACK)
    poll_until(
        lambda: callbacks.filter(status="sent").exists(),
        timeout=30,
        what="the callback marked sent",
        processes=everyone,
    )
    assert [(c.status, c.recipient) for c in callbacks] == [("sent", agent.callback_url)]
    body = ConsoleClient(web_url, key).get(request_id)
    (decided,) = body.approvals
    assert body.status == "decided" and decided.status == "approved"
    # Exactly one payment, carrying the key the console issued for this action.
    assert [
        (p["idempotency_key"], p["order_id"], p["amount_cents"]) for p in state["payments"]
    ] == [(decided.idempotency_key, "A-1001", 1250)]
    assert (
        state["messages"][-1]["text"] == "Done. refund_issue: refunded 1250 cents for order A-1001"
    )

    event = poll_until(
        lambda: effect_reported(approval.pk), timeout=30, what="effect.reported", processes=everyone
    )
    assert event.data["args_match"] is True
    assert event.data["flags"] == []
    assert event.data["idempotency_key"] == decided.idempotency_key
    assert event.data["executed_args_hash"] == canonical_hash(ARGS)
    outcome = ConsoleClient(web_url, key).get(request_id).approvals[0].outcome
    assert outcome["status"] == "succeeded" and outcome["args_match"] is True
    # The agent told the console its thread is over: the run shows completed there.
    poll_until(
        lambda: AgentRun.objects.filter(pk=remote.run_id, status="completed").exists(),
        timeout=30,
        what="the console's run completed",
        processes=everyone,
    )
    # The approval's page shows what the agent reports it executed.
    page.goto(f"{web_url}/approvals/{approval.pk}/")
    expect(page.locator('[data-outcome="succeeded"]')).to_contain_text("the approved args")
    bob_browser.screenshot("remote-outcome.png")


def test_an_agent_without_callbacks_long_polls_and_resumes_after_a_decision_over_the_api(
    processes, api_client_for, tmp_path, alice, bob
):
    policy_with_bob(bob)
    web = processes.web()
    processes.worker()
    agent, key = agent_register()  # no callback URL: the agent polls
    client = ConsoleClient(web.base_url, key)
    payments = Payments(tmp_path / "payments.sqlite")
    graph = agent_build(client=client, payments=payments, checkpoint_path=tmp_path / "cp.sqlite")
    config = {"configurable": {"thread_id": "poll-1"}}

    (request_id,) = pending_request_ids(
        graph.invoke({"messages": [{"role": "user", "content": ASK}]}, config)
    )
    assert client.wait(request_id, timeout=2).status == "pending"  # times out, still pending

    bob_api = api_client_for(bob)
    (approval,) = client.get(request_id).approvals
    shown = bob_api.get(f"/api/approvals/{approval.id}/")
    bob_api.post(
        f"/api/approvals/{approval.id}/decision/",
        {"decision": "approve", "payload_hash": shown["payload_hash"]},
        expect=(200, 201),
    )

    done = resume_when_decided(graph, client, config, request_id, timeout=60)
    assert done["messages"][-1].text == "Done. refund_issue: refunded 1250 cents for order A-1001"
    assert [p["idempotency_key"] for p in payments.all()] == [approval.idempotency_key]
    assert [r.id for r in client.list(thread_id="poll-1")] == [request_id]
    assert client.list(thread_id="another") == []
    reported = client.get(request_id).approvals[0].outcome
    assert reported["status"] == "succeeded" and reported["args_match"] is True
    assert not RemoteRequest.objects.get(pk=request_id).callback_url
