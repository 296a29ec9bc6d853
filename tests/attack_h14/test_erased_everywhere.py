"""Hostile review (issue 14): every page, API, admin page and export that shows an erased run
(or any run once a master key is gone) answers without a server error."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import override_settings

from agents.erasure import runs_erase
from agents.models import Effect
from agents.runtime import advance
from agents.services import run_start
from approvals.models import AgentRun, ApprovalRequest
from approvals.services import approval_decide
from audit.models import AuditEvent
from tests.agents.runtime.test_at_rest import K1, K2
from tests.support.people import client_for, rest_client_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]


def _get(client: Any, url: str) -> int | str:
    try:
        response = client.get(url)
        if getattr(response, "streaming", False):
            b"".join(response.streaming_content)
    except Exception as exc:  # noqa: BLE001 - a streamed body that breaks midway
        return f"{type(exc).__name__}: {exc}"
    return response.status_code


def _urls(run: AgentRun) -> list[str]:
    approvals = list(ApprovalRequest.objects.filter(run=run).values_list("pk", flat=True))
    effects = list(Effect.objects.filter(run=run).values_list("pk", flat=True))
    events = list(AuditEvent.objects.filter(run_id=run.pk).values_list("seq", flat=True))
    return [
        "/",
        "/runs/",
        f"/runs/{run.pk}/",
        "/metrics/",
        "/metrics/export.csv",
        "/audit/",
        f"/audit/?run={run.pk}",
        "/audit/verify/",
        *(f"/approvals/{pk}/" for pk in approvals),
        *(f"/audit/events/{seq}/" for seq in events),
        f"/admin/approvals/agentrun/{run.pk}/change/",
        "/admin/approvals/agentrun/",
        "/admin/approvals/approvalrequest/",
        *(f"/admin/approvals/approvalrequest/{pk}/change/" for pk in approvals),
        "/admin/agents/effect/",
        *(f"/admin/agents/effect/{pk}/change/" for pk in effects),
        "/admin/audit/auditevent/",
        *(f"/admin/audit/auditevent/{seq}/change/" for seq in events),
        "/admin/agents/erasure/",
    ]


def _apis(run: AgentRun) -> list[str]:
    approvals = list(ApprovalRequest.objects.filter(run=run).values_list("pk", flat=True))
    return [
        "/api/runs/",
        f"/api/runs/{run.pk}/",
        "/api/approvals/",
        *(f"/api/approvals/{pk}/" for pk in approvals),
        "/api/audit/",
        "/api/audit/?open=1",
        "/api/audit/export.jsonl?open=1",
        "/api/audit/export.csv?open=1",
        "/api/audit/export.jsonl",
    ]


def _server_errors(user: Any, run: AgentRun) -> dict[str, Any]:
    page, api = client_for(user), rest_client_for(user)
    page.raise_request_exception = api.raise_request_exception = False
    found = {}
    for client, urls in ((page, _urls(run)), (api, _apis(run))):
        for url in urls:
            status = _get(client, url)
            if not isinstance(status, int) or status >= 500:
                found[url] = status
    return found


@pytest.mark.parametrize("who", ["admin", "frank"])
def test_an_erased_run_is_no_server_error_anywhere(driven, frank, admin, who):
    runs_erase(runs=[driven.run], user=frank, reason="subject request 5")
    user = {"admin": admin, "frank": frank}[who]
    assert _server_errors(user, AgentRun.objects.get(pk=driven.run.pk)) == {}


def test_a_removed_master_key_is_no_server_error_in_the_audit_pages_and_exports(
    note_agent, alice, admin
):
    with override_settings(ENCRYPTION_KEYS=K1):
        run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
        assert advance.run_advance(run_id=run.id) == "waiting"
        approval = run.approvals.get()
        approval_decide(
            approval=approval, user=admin, decision="reject", seen_hash=approval.payload_hash
        )
        advance.run_advance(run_id=run.id)
        run = AgentRun.objects.get(pk=run.pk)
    with override_settings(ENCRYPTION_KEYS=K2):
        errors = _server_errors(admin, run)
    audit = {url: why for url, why in errors.items() if "audit" in url}
    assert audit == {}, f"audit pages and exports fail once k1 is gone: {audit}"


def test_the_edit_preview_and_decide_forms_of_an_erased_approval_are_no_server_error(
    driven, frank, admin
):
    runs_erase(runs=[driven.run], user=frank, reason="subject request 6")
    approval = ApprovalRequest.objects.get(run=driven.run)
    page = client_for(admin)
    page.raise_request_exception = False
    posts = {
        f"/approvals/{approval.pk}/edit-preview/": {
            "args": '{"order_id": "ORD-x", "amount": "1.00"}',
            "seen_hash": approval.payload_hash,
        },
        f"/approvals/{approval.pk}/decide/": {
            "decision": "approve",
            "seen_hash": approval.payload_hash,
        },
    }
    errors = {}
    for url, body in posts.items():
        status = page.post(url, body).status_code
        if status >= 500:
            errors[url] = status
    assert errors == {}
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is not None
