"""Hostile review (issue 14): one value that does not open (a master key taken out of
ENCRYPTION_KEYS, an envelope altered in the database) is a server error on every page that
lists it, the whole approval queue included, where the checkpoints' equivalent says so."""

from __future__ import annotations

import json

import pytest
from django.db import connection
from django.test import override_settings

from agents.runtime import advance
from agents.services import run_start
from approvals.models import AgentRun, ApprovalRequest
from tests.agents.runtime.test_at_rest import K1, K2
from tests.support.people import client_for, rest_client_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]


def _pages(run: AgentRun, approval: ApprovalRequest) -> list[str]:
    return [
        "/",
        f"/approvals/{approval.pk}/",
        "/runs/",
        f"/runs/{run.pk}/",
        f"/admin/approvals/agentrun/{run.pk}/change/",
        f"/admin/approvals/approvalrequest/{approval.pk}/change/",
        "/audit/",
    ]


def _apis(run: AgentRun, approval: ApprovalRequest) -> list[str]:
    return [f"/api/runs/{run.pk}/", "/api/approvals/", f"/api/approvals/{approval.pk}/"]


def _server_errors(user, run: AgentRun, approval: ApprovalRequest) -> dict[str, str]:
    page, api = client_for(user), rest_client_for(user)
    page.raise_request_exception = False
    api.raise_request_exception = False
    errors = {}
    for url in _pages(run, approval):
        response = page.get(url)
        if response.status_code >= 500:
            errors[url] = response.status_code
    for url in _apis(run, approval):
        response = api.get(url)
        if response.status_code >= 500:
            errors[url] = response.status_code
    return errors


def _waiting(note_agent, alice) -> tuple[AgentRun, ApprovalRequest]:
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    assert advance.run_advance(run_id=run.id) == "waiting"
    return AgentRun.objects.get(pk=run.pk), run.approvals.get()


def _plant(table: str, column: str, pk, envelope: dict) -> None:
    cast = "::jsonb" if connection.vendor == "postgresql" else ""
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {column} = %s{cast} WHERE id = %s",  # noqa: S608
            [
                json.dumps(envelope),
                pk.hex if connection.vendor == "sqlite" and table == "approvals_agentrun" else pk,
            ],
        )


def test_a_removed_master_key_is_not_a_server_error_on_any_page(note_agent, alice, admin):
    with override_settings(ENCRYPTION_KEYS=K1):
        run, approval = _waiting(note_agent, alice)
    with override_settings(ENCRYPTION_KEYS=K2):  # k1 taken out of the ring
        errors = _server_errors(admin, run, approval)
    assert not errors, f"server errors once the master key k1 is gone: {errors}"


@pytest.mark.parametrize(
    "token",
    ["v1.zz", "v2.abc.def", "v1.{run}.AAAA", "v1.{run}." + "A" * 64, "v1.{other}." + "A" * 64],
    ids=["no run", "unknown version", "too short", "does not open", "run without a key"],
)
def test_an_altered_envelope_in_one_approval_is_not_a_server_error(note_agent, alice, admin, token):
    run, approval = _waiting(note_agent, alice)
    token = token.format(run=run.pk.hex, other="0" * 32)
    _plant("approvals_approvalrequest", "payload", approval.pk, {"$sealed": token})
    errors = _server_errors(admin, run, approval)
    assert not errors, f"server errors from one altered approval payload: {errors}"
