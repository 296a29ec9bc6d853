"""A compliance officer filters the audit log in a real browser and downloads a JSONL export
that verifies offline."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from audit.services import event_record
from audit.verify import export_file_verify
from tests.support.factories import DEMO_PASSWORD

SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def _history(requester: User, reviewer: User) -> int:
    """Two runs, each asking for a refund that a reviewer decides; returns the decided count."""
    decided = 0
    for amount in (40, 900):
        run_id = uuid.uuid4()
        event_record(
            action="run.created", actor=requester, run_id=run_id, data={"agent": "refunds"}
        )
        payload = {"tool": "refund", "args": {"order": "A-17", "amount": amount}}
        event_record(
            action="approval.requested",
            actor=f"agent:{run_id}",
            run_id=run_id,
            approval_id=amount,
            tool="refund",
            data={"payload": payload, "payload_hash": "ef" * 32, "tier": "write"},
        )
        event_record(
            action="approval.decided",
            actor=reviewer,
            run_id=run_id,
            approval_id=amount,
            tool="refund",
            data={
                "decision": "edit",
                "role": "reviewer",
                "shown": {"payload": payload, "payload_hash": "ef" * 32},
                "final_args": {"order": "A-17", "amount": 30},
                "diff": {"amount": [amount, 30]},
            },
        )
        decided += 1
        event_record(
            action="effect.succeeded",
            actor=f"agent:{run_id}",
            run_id=run_id,
            approval_id=amount,
            tool="refund",
            data={"idempotency_key": f"{run_id}:call-1", "result": {"refunded": 30}},
        )
    return decided


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_compliance_officer_filters_the_log_and_downloads_a_verifiable_export(
    live_server, tmp_path, frank, alice, bob
):
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    decided = _history(alice, bob)

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=["--no-sandbox", "--disable-background-networking", "--disable-gpu"],
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900}, accept_downloads=True)
            page.goto(f"{live_server.url}/login/?next=/audit/")
            page.fill("input[name=username]", frank.username)
            page.fill("input[name=password]", DEMO_PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_url(f"{live_server.url}/audit/")
            assert page.locator("#audit-table tbody tr").count() == 8

            page.fill("input[name=action]", "approval.decided")
            page.fill("input[name=actor]", "bob")
            page.click("text=Apply filters")
            page.wait_for_url("**/audit/?*action=approval.decided*")
            page.locator("#audit-table h2", has_text="Filtered events").wait_for()
            rows = page.locator("#audit-table tbody tr")
            assert rows.count() == decided
            assert all("approval.decided" in text for text in rows.all_inner_texts())
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "audit-log.png"), full_page=True)

            with page.expect_download() as download_info:
                page.click("text=Download JSONL")
            path = tmp_path / "export.jsonl"
            download_info.value.save_as(path)

            page.click("#audit-table tbody tr >> nth=0 >> a >> nth=0")
            page.locator("h2", has_text="Hash chain").wait_for()
            assert "payload_hash" in page.inner_text("main")
            page.screenshot(path=str(SCREENSHOTS / "audit-event.png"), full_page=True)
        finally:
            browser.close()

    with path.open("rb") as handle:
        result, info = export_file_verify(handle)
    assert result.ok, result.reason
    assert result.count == decided
    assert info["filters"] == {"action": "approval.decided", "actor": "bob"}
