"""Every main page works under the Content-Security-Policy: no violation, no page error."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, Response, expect

from approvals.models import RiskTier, WebhookEndpoint
from approvals.services import policy_seed_demo
from tests.e2e.test_console_e2e import REFUND_APPROVED, waiting_approval
from tests.support.browser import SCREENSHOTS, VIEWPORT

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

# The browser reports a violation on the console; the DOM event catches any it words otherwise.
REPORT_VIOLATIONS = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`Content Security Policy violation: ${event.violatedDirective} ${event.blockedURI}`);
});
"""


def watched(page: Page) -> list[str]:
    """What ``page`` reports from now on: CSP messages (of any level) and uncaught errors."""
    problems: list[str] = []
    page.add_init_script(REPORT_VIOLATIONS)
    page.on(
        "console",
        lambda msg: "Content Security Policy" in msg.text and problems.append(msg.text),
    )
    page.on("pageerror", lambda exc: problems.append(f"uncaught: {exc}"))
    return problems


def visit(page: Page, path: str) -> Response:
    response = page.goto(path)
    assert response is not None and response.ok, f"{path}: {response and response.status}"
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "unsafe" not in policy, path
    page.wait_for_load_state("networkidle")
    return response


def test_every_main_page_loads_under_the_csp_without_a_violation(
    log_in, browser, web_url, api_client_for, alice, admin
):
    policy_seed_demo()
    endpoint = WebhookEndpoint.objects.create(name="chat", url="https://hooks.example.com/x")
    tier = RiskTier.objects.get(name="write")
    approval = waiting_approval(api_client_for(alice), agent="refund_agent", input=REFUND_APPROVED)

    anonymous = browser.new_context(base_url=web_url, viewport=VIEWPORT)
    try:
        page = anonymous.new_page()
        problems = watched(page)
        visit(page, "/admin/login/")
        expect(page.locator("#id_username")).to_be_visible()
    finally:
        anonymous.close()
    assert problems == []

    page = log_in(admin).page
    problems = watched(page)
    for path in (
        "/",
        f"/approvals/{approval['id']}/",
        "/runs/",
        f"/runs/{approval['run']}/",
        "/runs/new/",
        "/audit/",
        "/audit/verify/",
        "/metrics/",
        "/admin/",
        "/admin/approvals/notification/",
        f"/admin/approvals/risktier/{tier.pk}/change/",
        f"/admin/approvals/webhookendpoint/{endpoint.pk}/change/",
        "/admin/console/apitoken/",
        "/account/tokens/",
    ):
        visit(page, path)
    # A token made on the account page: its secret is shown once.
    page.fill("#id_name", "laptop")
    page.click("button:has-text('Create token')")
    expect(page.locator("body")).to_contain_text("laptop")
    page.screenshot(path=str(SCREENSHOTS / "account-tokens.png"), full_page=True)
    visit(page, "/api/docs/")
    # Swagger UI rendered the schema: its setup script ran.
    expect(page.locator(".swagger-ui .information-container")).to_contain_text(
        "Approval console API"
    )
    expect(page.locator(".opblock").first).to_be_visible()

    assert problems == []
