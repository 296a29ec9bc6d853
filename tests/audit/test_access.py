"""Who sees the audit: compliance and admins everything, nobody else any of it (its events carry
run data; a run's own history is on its page, for those who may see the run)."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
import time_machine

from audit.services import event_record, events_seed

pytestmark = pytest.mark.django_db


@pytest.fixture
def approvals_history(bob, carol):
    """Approval 101 decided by bob, 102 by carol, plus a run event with no approval."""
    run_id = uuid.uuid4()
    event_record(action="run.created", actor="alice", run_id=run_id)
    for approval_id, reviewer in ((101, bob), (102, carol)):
        event_record(
            action="approval.requested",
            actor=f"agent:{run_id}",
            run_id=run_id,
            approval_id=approval_id,
            tool="refund",
            data={"payload": {"amount": approval_id}, "payload_hash": "cd" * 32},
        )
        event_record(
            action="approval.decided",
            actor=reviewer,
            run_id=run_id,
            approval_id=approval_id,
            tool="refund",
            data={"decision": "edit", "diff": {"amount": [approval_id, 5]}, "role": "reviewer"},
        )
    event_record(
        action="effect.succeeded",
        actor=f"agent:{run_id}",
        run_id=run_id,
        approval_id=101,
        tool="refund",
        data={"idempotency_key": f"{run_id}:call-1"},
    )
    return run_id


def _seqs(client, **params) -> list[int]:
    response = client.get("/api/audit/", params)
    assert response.status_code == 200, response.content
    return [row["seq"] for row in response.json()["results"]]


def test_compliance_sees_every_event_newest_first(client, frank, approvals_history):
    client.force_login(frank)

    assert _seqs(client) == [6, 5, 4, 3, 2, 1]


def test_admins_see_every_event(client, admin_user, approvals_history):
    client.force_login(admin_user)

    assert len(_seqs(client)) == 6


def test_a_reviewer_may_not_read_the_audit_trail(client, bob, approvals_history):
    # Issue 12: reviewers read the events of approvals they decided until the audit trail
    # became compliance's (its events carry inputs, payloads and tracebacks of runs).
    client.force_login(bob)

    assert client.get("/api/audit/").status_code == 403
    assert client.get("/audit/").status_code == 403
    assert client.get("/audit/events/3/").status_code == 403


def test_people_without_audit_rights_get_403(client, dave, approvals_history):
    client.force_login(dave)

    assert client.get("/api/audit/").status_code == 403
    assert client.get("/audit/").status_code == 403
    assert client.get("/audit/events/1/").status_code == 403


def test_anonymous_visitors_are_sent_to_login(client, approvals_history):
    assert client.get("/audit/").status_code == 302
    assert client.get("/api/audit/").status_code in (401, 403)


def test_api_filters_match_the_page_filters(client, frank, approvals_history):
    client.force_login(frank)

    assert _seqs(client, action="approval.*", actor="carol") == [5]
    assert _seqs(client, approval=101) == [6, 3, 2]
    assert _seqs(client, run=str(approvals_history), action="run.created") == [1]
    assert _seqs(client, tool="refund", action="effect.succeeded") == [6]


def test_api_rejects_bad_filters(client, frank):
    client.force_login(frank)

    response = client.get("/api/audit/", {"date_from": "2026-02-01", "date_to": "2026-01-01"})

    assert response.status_code == 400


def test_api_pages_with_a_cursor(client, frank):
    events_seed(count=7)
    client.force_login(frank)

    first = client.get("/api/audit/", {"page_size": 3}).json()
    second = client.get(first["next"]).json()

    assert [r["seq"] for r in first["results"]] == [7, 6, 5]
    assert [r["seq"] for r in second["results"]] == [4, 3, 2]


def test_the_log_page_shows_filtered_events_and_export_links(client, frank, approvals_history):
    client.force_login(frank)

    response = client.get("/audit/", {"action": "approval.decided"})

    html = response.content.decode()
    assert response.status_code == 200
    assert html.count('<span class="badge">approval.decided</span>') == 2
    assert "effect.succeeded" not in html
    assert "/api/audit/export.jsonl?action=approval.decided" in html


def test_the_log_page_answers_htmx_with_the_table_only(client, frank, approvals_history):
    client.force_login(frank)

    response = client.get("/audit/", {"tool": "refund"}, HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert html.lstrip().startswith('<section id="audit-table"')
    assert "<html" not in html


def test_the_log_page_pages_to_older_events(client, frank):
    events_seed(count=60)
    client.force_login(frank)

    first = client.get("/audit/").content.decode()
    older = client.get("/audit/", {"before": 11}).content.decode()

    assert 'href="/audit/events/60/"' in first
    assert "before=11" in first
    assert 'href="/audit/events/10/"' in older
    assert 'href="/audit/events/11/"' not in older


def test_the_event_page_shows_the_full_record(client, frank, approvals_history):
    client.force_login(frank)

    html = client.get("/audit/events/3/").content.decode()

    assert "approval.decided" in html
    assert "bob" in html
    assert "diff" in html and "&quot;amount&quot;" in html
    assert "Previous hash" in html


def test_the_exports_and_verify_pages_are_for_compliance(client, frank, bob, approvals_history):
    client.force_login(bob)
    assert client.get("/audit/exports/").status_code == 403
    assert client.get("/audit/verify/").status_code == 403

    client.force_login(frank)
    client.get("/api/audit/export.jsonl").getvalue()
    exports = client.get("/audit/exports/").content.decode()
    verify = client.get("/audit/verify/").content.decode()

    assert "jsonl" in exports and "complete" in exports
    assert "Intact" in verify


def test_date_filters_take_whole_days(client, frank):
    for day in (1, 2, 3):
        with time_machine.travel(dt.datetime(2026, 3, day, 23, 59, tzinfo=dt.UTC), tick=False):
            event_record(action="policy.changed", actor="system:config", data={"day": day})
    client.force_login(frank)

    assert _seqs(client, date_from="2026-03-02", date_to="2026-03-02") == [2]
    assert _seqs(client, date_from="2026-03-02") == [3, 2]
    assert _seqs(client, date_to="2026-03-01") == [1]
