"""A run started from the form generated from the agent's input schema, then decided on a phone:
at 390 px no page scrolls sideways and the decision panel is in reach."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.support.browser import PHONE
from tests.support.runs import is_completed, is_waiting_for_a_person, pending_approvals, run_wait

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE_OPTIONS = {"viewport": PHONE, "is_mobile": True, "has_touch": True, "device_scale_factor": 2}
OVERFLOWING = """() => Array.from(document.querySelectorAll("body *"))
    .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
    .slice(0, 5)
    .map((el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + "." + el.className)"""


def assert_no_sideways_scroll(page: Page) -> None:
    width, inner = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
    assert width <= inner, f"{page.url} scrolls sideways ({width} > {inner}): " + ", ".join(
        page.evaluate(OVERFLOWING)
    )


def test_a_run_started_from_the_generated_form_is_decided_on_a_phone(
    log_in, api_client_for, alice, bob
):
    # Alice, on a desktop, picks the incident copilot: its inputs replace the refund agent's.
    alice_browser = log_in(alice)
    page = alice_browser.page
    page.goto("/runs/new/?agent=refund_agent")
    expect(page.locator("#id_input-order_id")).to_have_value("A-1001")  # the example input
    page.select_option("#id_agent", "incident_copilot")
    expect(page.locator("#id_input-order_id")).to_have_count(0)
    service = page.locator("#id_input-service")
    expect(service).to_have_value("checkout")
    expect(page.locator("#id_input-severity")).to_have_value("sev1")
    assert page.evaluate("() => location.search") == "?agent=incident_copilot"
    alice_browser.screenshot("run-new.png")

    # A value the agent's schema refuses comes back next to its input, the others as typed.
    alice_browser.expect_error(r"status of 400")
    service.fill("Payments!")
    page.fill("#id_input-signal", "card declines at 9%")
    page.select_option("#id_input-severity", "sev3")
    page.get_by_role("button", name="Start run", exact=True).click()
    expect(page.locator("#id_input-service_error")).to_contain_text("should match pattern")
    expect(page.locator("#id_input-signal")).to_have_value("card declines at 9%")
    expect(page.locator("#id_input-severity")).to_have_value("sev3")

    page.locator("#id_input-service").fill("payments")
    page.get_by_role("button", name="Start run", exact=True).click()
    page.wait_for_url("**/runs/*-*/")
    expect(page.locator(".flash")).to_contain_text("Started a incident_copilot run.")
    run_id = urlsplit(page.url).path.strip("/").split("/")[-1]
    alice_api = api_client_for(alice)
    waiting = run_wait(
        alice_api, run_id, until=is_waiting_for_a_person, what="its approval", timeout=60
    )
    assert waiting["input"] == {
        "service": "payments",
        "signal": "card declines at 9%",
        "severity": "sev3",
    }
    [approval] = pending_approvals(waiting)

    # Bob, on a phone: the queue, the approval and the run pages fit the screen.
    bob_browser = log_in(bob, **PHONE_OPTIONS)
    phone = bob_browser.page
    link = phone.locator(f'#queue-table a.row-link[href="/approvals/{approval["id"]}/"]')
    expect(link).to_be_visible()
    assert_no_sideways_scroll(phone)
    bob_browser.screenshot("phone-queue.png")

    link.click()
    expect(phone.locator("h1 code")).to_have_text("create_incident_ticket")
    assert_no_sideways_scroll(phone)
    approve = phone.locator("#decide-approve button[type=submit]")
    approve.scroll_into_view_if_needed()
    expect(approve).to_be_in_viewport()
    expect(approve).to_be_visible()
    bob_browser.screenshot("phone-approval.png")

    for url in ("/runs/", f"/runs/{run_id}/", "/runs/new/"):
        phone.goto(url)
        assert_no_sideways_scroll(phone)

    phone.goto(f"/approvals/{approval['id']}/")
    phone.locator("#decide-approve button[type=submit]").click()
    phone.wait_for_url(lambda url: urlsplit(url).path == "/")
    expect(phone.locator(".flash")).to_contain_text("You approved create_incident_ticket")
    run_wait(alice_api, run_id, until=is_completed, what="completion", timeout=60)
