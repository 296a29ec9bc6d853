"""The example agent end to end: registered through CONSOLE_AGENTS in a real web server and
qcluster, started from another service with the example client, decided in a browser."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from examples import client
from tests.support.runs import is_completed, is_waiting_for_a_person, run_wait

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REQUEST = (
    "Customer C-42 was charged twice: credit 30 USD. Customer C-7 asks us to close their account."
)
REJECT_MESSAGE = "Retention wants to call C-7 first."


def on_queue(page: Page) -> None:
    page.wait_for_url(lambda url: urlsplit(url).path == "/")


def start_from_another_service(base_url: str) -> dict[str, Any]:
    """What examples/client.py does: a token, a run with an Idempotency-Key, polling."""
    token = client.token_get(base_url, username="alice", password="demo")
    run_input = {"messages": [{"role": "user", "content": REQUEST}]}
    first = client.run_start(
        base_url, token=token, agent="helpdesk", input=run_input, key="helpdesk-e2e-1"
    )
    again = client.run_start(
        base_url, token=token, agent="helpdesk", input=run_input, key="helpdesk-e2e-1"
    )
    assert again["id"] == first["id"]  # the same key starts nothing twice
    waiting = client.run_poll(base_url, token=token, run_id=first["id"], timeout=60)
    assert waiting["status"] == "waiting", waiting
    return waiting


def test_the_example_agent_is_governed_end_to_end(log_in, web_url, api_client_for, alice, bob):
    run = start_from_another_service(web_url)
    alice_api = api_client_for(alice)
    run = run_wait(
        alice_api,
        run["id"],
        until=lambda r: (
            is_waiting_for_a_person(r)
            and {a["tool"] for a in r["approvals"]} == {"issue_credit", "close_account"}
        ),
        what="both gated calls",
        timeout=60,
    )
    approvals = {a["tool"]: a for a in run["approvals"]}
    credit, close = approvals["issue_credit"], approvals["close_account"]
    assert (credit["tier"], close["tier"]) == ("write", "critical")
    assert run["effects"] == []  # the lookups read; nothing was written yet

    bob_browser = log_in(bob)
    page = bob_browser.page
    for approval in (credit, close):
        expect(page.locator(f'a.row-link[href="/approvals/{approval["id"]}/"]')).to_be_visible()

    # The enriched payload: args, rationale, blast radius and the lookup as evidence.
    page.goto(f"/approvals/{credit['id']}/")
    expect(page.locator("h1 code")).to_have_text("issue_credit")
    expect(page.locator("table.args")).to_contain_text("C-42")
    why = page.locator("#why-heading + dl")
    expect(why).to_contain_text("Credits 30 USD to customer C-42")
    expect(why).to_contain_text("C-42 asks for 30 USD back")
    expect(why.locator(".evidence")).to_contain_text("Ada Lovelace")

    # Edit the amount (the form comes from the tool's own args schema), then confirm.
    page.get_by_text("Edit the arguments, then approve").click()
    page.locator("#id_args-amount").fill("25")
    page.get_by_role("button", name="Preview changes").click()
    expect(page.locator("#edit-diff ins")).to_have_text("25")
    page.get_by_role("button", name="Confirm edit and approve").click()
    on_queue(page)
    expect(page.locator(".flash")).to_contain_text("You edited and approved issue_credit")

    # The answered branch runs at once; the other keeps waiting.
    partial = run_wait(
        alice_api,
        run["id"],
        # The effect is recorded a moment before the run is marked waiting again.
        until=lambda r: (
            any(e["tool"] == "issue_credit" for e in r["effects"]) and r["status"] != "running"
        ),
        what="the approved credit, then the run back to waiting",
        timeout=60,
    )
    assert partial["status"] == "waiting"
    [effect] = partial["effects"]
    assert (effect["status"], effect["approval"]) == ("succeeded", credit["id"])

    page.goto(f"/approvals/{close['id']}/")
    expect(page.locator("#why-heading + dl")).to_contain_text("cannot be reopened")
    page.locator("#reject-group > summary").click()
    page.fill("#reject-message", REJECT_MESSAGE)
    page.click("#decide-reject button[type=submit]")
    on_queue(page)
    expect(page.locator(".flash")).to_contain_text("You rejected close_account")

    done = run_wait(alice_api, run["id"], until=is_completed, what="completion", timeout=60)
    assert [e["tool"] for e in done["effects"]] == ["issue_credit"]
    summary = done["output"]["messages"][-1]["content"]
    assert '"credited": 25' in summary
    assert REJECT_MESSAGE in summary

    page.goto(f"/runs/{run['id']}/")
    expect(page.locator("h1 .badge")).to_have_text("Completed")
    expect(page.locator("#effects-heading + table")).to_contain_text("issue_credit")
    expect(page.locator("#approvals-heading + table")).to_contain_text("Rejected")

    # The API's documentation page renders from local assets, listing the runs API.
    page.goto("/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("Approval console API")
    expect(page.locator(".swagger-ui")).to_contain_text("/api/runs/{run_id}/")
