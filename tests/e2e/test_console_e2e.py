"""Reviewers work the console in a real browser against a real web server and qcluster."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from agents.models import SandboxTicket
from tests.support.processes import ApiClient
from tests.support.runs import (
    is_completed,
    is_waiting_for_a_person,
    pending_approvals,
    run_start,
    run_wait,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REFUND_APPROVED = {
    "order_id": "A-1001",
    "amount": "49.90",
    "reason": "arrived damaged",
    "sku": "MUG-BLUE",
    "quantity": 1,
    "customer_email": "customer@example.com",
}
REFUND_REJECTED = {**REFUND_APPROVED, "order_id": "A-1002", "reason": "changed their mind"}
INCIDENT = {"service": "payments", "signal": "card declines at 9%", "severity": "sev3"}
EDITED_TITLE = "sev3 payments: card declines after the issuer outage"
MARKUP_SIGNAL = 'spike after <img id="injected" src="x" onerror="document.title=1">'
REJECT_MESSAGE = "Outside the 30-day return window: no refund."


def waiting_approval(api: ApiClient, *, agent: str, input: dict[str, Any]) -> dict[str, Any]:
    """Start a run as ``api``'s user and return its one pending approval."""
    run = run_start(api, agent=agent, input=input)
    waiting = run_wait(
        api, run["id"], until=is_waiting_for_a_person, what="a pending approval", timeout=60
    )
    [approval] = pending_approvals(waiting)
    return approval


def completed_run(api: ApiClient, run_id: str) -> dict[str, Any]:
    return run_wait(api, run_id, until=is_completed, what="completion", timeout=60)


def on_queue(page: Page) -> None:
    """Wait for the redirect to the queue that follows a decision."""
    page.wait_for_url(lambda url: urlsplit(url).path == "/")


def queue_link(approval: dict[str, Any]) -> str:
    return f'#queue-table a.row-link[href="/approvals/{approval["id"]}/"]'


def test_bob_approves_edits_and_rejects_from_the_queue_and_each_run_completes(
    log_in, api_client_for, alice, bob
):
    alice_api = api_client_for(alice)
    refund = waiting_approval(alice_api, agent="refund_agent", input=REFUND_APPROVED)
    ticket = waiting_approval(alice_api, agent="incident_copilot", input=INCIDENT)
    refused = waiting_approval(alice_api, agent="refund_agent", input=REFUND_REJECTED)
    assert (refund["tool"], ticket["tool"], refused["tool"]) == (
        "refund_order",
        "create_incident_ticket",
        "refund_order",
    )

    bob_browser = log_in(bob)
    page = bob_browser.page
    expect(page.locator("#queue-heading")).to_have_text("Waiting for you")
    for approval in (refund, ticket, refused):
        expect(page.locator(queue_link(approval))).to_be_visible()
    bob_browser.screenshot("queue.png")

    # Approve as proposed.
    page.click(queue_link(refund))
    expect(page.locator("h1 code")).to_have_text("refund_order")
    expect(page.locator("table.args")).to_contain_text("A-1001")
    bob_browser.screenshot("approval-detail.png")
    page.click("#decide-approve button[type=submit]")
    on_queue(page)
    expect(page.locator(".flash")).to_contain_text(
        f"You approved refund_order (approval #{refund['id']})"
    )
    expect(page.locator(queue_link(refund))).to_have_count(0)

    # Edit: a title the tool's schema refuses, then a good one, its diff, and confirm.
    page.click(queue_link(ticket))
    page.get_by_text("Edit the arguments, then approve").click()
    title = page.locator("#id_args-title")
    title.fill("ab")
    page.get_by_role("button", name="Preview changes").click()
    expect(page.locator("#id_args-title_error")).to_contain_text("too short")
    expect(page.locator("#edit-diff")).to_have_count(0)
    title.fill(EDITED_TITLE)
    page.get_by_role("button", name="Preview changes").click()
    diff = page.locator("#edit-diff")
    expect(diff.locator("ins")).to_have_text(EDITED_TITLE)
    expect(diff.locator("del")).to_have_text(ticket["args"]["title"])
    expect(page.locator("#id_args-title_error")).to_have_count(0)
    bob_browser.screenshot("approval-edit-diff.png")
    page.get_by_role("button", name="Confirm edit and approve").click()
    on_queue(page)
    expect(page.locator(".flash")).to_contain_text(
        f"You edited and approved create_incident_ticket (approval #{ticket['id']})"
    )

    # Reject with a message to the agent.
    page.click(queue_link(refused))
    page.locator("#reject-group > summary").click()
    page.fill("#reject-message", REJECT_MESSAGE)
    page.click("#decide-reject button[type=submit]")
    on_queue(page)
    expect(page.locator(".flash")).to_contain_text(
        f"You rejected refund_order (approval #{refused['id']})"
    )
    expect(page.locator("#queue-table tbody")).to_contain_text("Nothing is waiting")

    runs = {
        name: completed_run(alice_api, a["run"])
        for name, a in (("refund", refund), ("ticket", ticket), ("refused", refused))
    }

    # The approved refund ran its saga; the page lists each effect the API reports.
    page.goto(f"/runs/{refund['run']}/")
    expect(page.locator("h1 .badge")).to_have_text("Completed")
    effects = page.locator("#effects-heading + table tbody")
    api_effects = runs["refund"]["effects"]
    assert "refund_payment" in {e["tool"] for e in api_effects}
    expect(effects.locator("tr")).to_have_count(len(api_effects))
    for effect in api_effects:
        expect(effects).to_contain_text(effect["tool"])
    expect(page.locator("#approvals-heading + table")).to_contain_text("Approved")

    # The edited ticket was written with the reviewer's title.
    page.goto(f"/runs/{ticket['run']}/")
    expect(page.locator("h1 .badge")).to_have_text("Completed")
    expect(page.locator("#effects-heading + table")).to_contain_text("create_incident_ticket")
    expect(page.locator(".sandbox-card")).to_contain_text(EDITED_TITLE)
    expect(page.locator("#approvals-heading + table")).to_contain_text("Edited")
    bob_browser.screenshot("run-detail.png")
    # Exactly the edited args ran: the untouched multi-line body kept its line breaks.
    written = SandboxTicket.objects.get()
    assert (written.title, written.body) == (EDITED_TITLE, ticket["args"]["body"])

    # The rejected refund completed without touching anything.
    assert runs["refused"]["effects"] == []
    page.goto(f"/runs/{refused['run']}/")
    expect(page.locator("h1 .badge")).to_have_text("Completed")
    expect(page.locator("#effects-heading + table tbody")).to_have_text("No effects applied.")
    expect(page.locator(".sandbox-card")).to_have_count(0)
    expect(page.locator("#approvals-heading + table")).to_contain_text("Rejected")


def test_dave_sees_nothing_he_may_decide(log_in, api_client_for, alice, dave):
    approval = waiting_approval(api_client_for(alice), agent="incident_copilot", input=INCIDENT)

    dave_browser = log_in(dave)
    page = dave_browser.page
    expect(page.locator("#queue-table tbody tr")).to_have_count(1)
    expect(page.locator("#queue-table tbody")).to_contain_text(
        "You may not decide approvals, so none wait for you."
    )
    expect(page.locator("a.row-link")).to_have_count(0)

    # Nor can he open one by its address.
    dave_browser.expect_error(r"status of 404")
    response = page.goto(f"/approvals/{approval['id']}/")
    assert response is not None and response.status == 404


def test_second_reviewer_is_told_who_already_decided(
    log_in, api_client_for, alice, bob, carol, frank
):
    # The alert text carries markup: the pages must show it as text, never run it.
    incident = {**INCIDENT, "signal": MARKUP_SIGNAL}
    approval = waiting_approval(api_client_for(alice), agent="incident_copilot", input=incident)
    detail = f"/approvals/{approval['id']}/"
    bob_browser, carol_browser = log_in(bob), log_in(carol)
    bob_browser.page.goto(detail)
    carol_browser.page.goto(detail)
    for person in (bob_browser, carol_browser):
        expect(person.page.locator("table.args")).to_contain_text(MARKUP_SIGNAL)
        expect(person.page.locator("#injected")).to_have_count(0)
        expect(person.page.locator("#decide-approve button")).to_be_enabled()

    bob_browser.page.click("#decide-approve button[type=submit]")
    on_queue(bob_browser.page)
    expect(bob_browser.page.locator(".flash")).to_contain_text("You approved")

    carol_browser.expect_error(r"status of 409")
    with carol_browser.page.expect_navigation() as navigation:
        carol_browser.page.click("#decide-approve button[type=submit]")
    assert navigation.value.status == 409
    conflict = carol_browser.page.locator("#conflict")
    expect(conflict).to_contain_text("bob already approved this approval")
    expect(conflict).to_contain_text("Your decision was not recorded.")
    expect(carol_browser.page.locator(".decision-panel")).to_have_count(0)

    bob_api = api_client_for(bob)
    decided = bob_api.get(f"/api/approvals/{approval['id']}/")
    assert (decided["status"], decided["decided_by"]) == ("approved", "bob")
    # The audit trail is compliance's (issue 12): frank reads who decided.
    audit = api_client_for(frank)
    events = audit.get(f"/api/audit/?approval={approval['id']}&action=approval.decided")
    events = events["results"] if isinstance(events, dict) else events
    assert [e["actor_username"] for e in events] == ["bob"]
    completed_run(api_client_for(alice), approval["run"])
