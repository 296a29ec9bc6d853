"""A signed link from bob's e-mail, in a real browser against a real web server and qcluster:
it decides once, for bob only, while the approval waits; a GET never decides."""

from __future__ import annotations

import email
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import expect

from approvals.models import ApprovalRequest, DecisionLink
from approvals.services import policy_seed_demo
from audit.models import AuditEvent
from tests.support.browser import ASYNC_UNSAFE
from tests.support.runs import (
    is_completed,
    is_waiting_for_a_person,
    pending_approvals,
    run_start,
    run_wait,
)

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

REFUND = {
    "order_id": "A-2001",
    "amount": "39.90",
    "reason": "arrived damaged",
    "sku": "MUG-BLUE",
    "quantity": 1,
    "customer_email": "customer@example.com",
}


@pytest.fixture
def mail_dir(tmp_path: Path) -> Path:
    return tmp_path / "mail"


@pytest.fixture
def web_url(processes, collected_static, mail_dir, bob, carol) -> str:
    """The demo policy (bob and carol approve tier "write"), and servers that write each
    e-mail to ``mail_dir`` (Django's file backend)."""
    policy_seed_demo()
    bob.groups.add(Group.objects.get(name="approvers-write"))
    carol.groups.add(*Group.objects.filter(name__in=["approvers-write", "approvers-critical"]))
    env = {
        ASYNC_UNSAFE: "",
        "EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend",
        "EMAIL_FILE_PATH": str(mail_dir),
    }
    web = processes.web(env=env)
    processes.worker(env=env)
    return web.base_url


def link_in_mail(mail_dir: Path, *, to: str, approval_id: int, timeout: float = 60) -> str:
    """The path of the "Review and approve" link in the request e-mail ``to`` got."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in sorted(mail_dir.glob("*.log")) if mail_dir.exists() else []:
            for chunk in path.read_text().split("-" * 79):
                if not chunk.strip():
                    continue
                message = email.message_from_string(chunk.strip())
                body = message.get_payload(decode=True).decode()
                if message["To"] == to and f"Open approval #{approval_id}>" in body:
                    [line] = [x for x in body.splitlines() if x.startswith("Review and approve: ")]
                    return urlsplit(line.removeprefix("Review and approve: ")).path
        time.sleep(0.3)
    raise AssertionError(f"no e-mail with a link to {to} for approval #{approval_id}")


def waiting_approval(api: Any) -> dict[str, Any]:
    run = run_start(api, agent="refund_agent", input=REFUND)
    waiting = run_wait(
        api, run["id"], until=is_waiting_for_a_person, what="an approval", timeout=60
    )
    [approval] = pending_approvals(waiting)
    return approval


def votes_on(approval_id: int) -> int:
    return AuditEvent.objects.filter(action="approval.voted", approval_id=approval_id).count()


def test_a_signed_link_decides_once_for_its_recipient_only(
    log_in, api_client_for, web_url, mail_dir, alice, bob, carol
):
    alice_api = api_client_for(alice)
    approval = waiting_approval(alice_api)
    link = link_in_mail(mail_dir, to=bob.email, approval_id=approval["id"])
    assert link.startswith("/links/")
    carol_link = link_in_mail(mail_dir, to=carol.email, approval_id=approval["id"])
    assert carol_link != link

    # A link scanner's GET (no session) is sent to sign in; bob's own GET shows the page.
    scanner = httpx.get(web_url + link, follow_redirects=False)
    assert scanner.status_code == 302 and scanner.headers["location"].startswith("/login/")
    bob_browser = log_in(bob)
    page = bob_browser.page
    assert page.request.get(link).status == 200
    assert votes_on(approval["id"]) == 0

    # Carol opens bob's forwarded link: it decides nothing, and shows nothing of the approval.
    carol_browser = log_in(carol)
    carol_browser.expect_error(r"status of 403")
    forwarded = carol_browser.page.goto(link)
    assert forwarded is not None and forwarded.status == 403
    expect(carol_browser.page.locator("#link-refused")).to_contain_text("sent to someone else")
    expect(carol_browser.page.locator("body")).not_to_contain_text("A-2001")
    assert votes_on(approval["id"]) == 0

    # Bob: the confirmation page with the full detail, then approve; the run goes on.
    page.goto(link)
    expect(page.locator("h1 code")).to_have_text("refund_order")
    expect(page.locator("table.args")).to_contain_text("A-2001")
    expect(page.locator("#why-heading")).to_be_visible()
    expect(page.locator("#run-heading")).to_be_visible()
    expect(page.locator("#link-panel")).to_contain_text("sent to you, bob")
    bob_browser.screenshot("signed-link.png")
    page.click("#link-approve button[type=submit]")
    page.wait_for_url(lambda url: urlsplit(url).path == f"/approvals/{approval['id']}/")
    expect(page.locator(".flash")).to_contain_text("You approved refund_order")
    run = run_wait(alice_api, approval["run"], until=is_completed, what="completion", timeout=60)
    assert "refund_payment" in {e["tool"] for e in run["effects"]}
    voted = AuditEvent.objects.get(action="approval.voted", approval_id=approval["id"])
    assert (voted.actor_username, voted.data["via"]) == ("bob", "link")

    # The same link again: already used, nothing decided.
    bob_browser.expect_error(r"status of 409")
    again = page.goto(link)
    assert again is not None and again.status == 409
    expect(page.locator("#link-refused")).to_contain_text("already used")
    assert votes_on(approval["id"]) == 1

    # A link whose approval has expired decides nothing.
    later = waiting_approval(alice_api)
    expiring = link_in_mail(mail_dir, to=bob.email, approval_id=later["id"])
    ApprovalRequest.objects.filter(pk=later["id"]).update(expires_at=timezone.now())
    bob_browser.expect_error(r"status of 410")
    expired = page.goto(expiring)
    assert expired is not None and expired.status == 410
    expect(page.locator("#link-refused")).to_contain_text("expired")
    assert votes_on(later["id"]) == 0
    assert DecisionLink.objects.get(approval_id=later["id"], recipient=bob).used_at is None
