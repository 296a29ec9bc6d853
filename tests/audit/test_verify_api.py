"""GET /api/audit/verify/ and manage.py audit_verify on the database."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from audit.services import events_seed
from tests.support.audit import triggers_disabled

pytestmark = pytest.mark.django_db


def test_verify_api_reports_an_intact_chain(client, frank):
    events_seed(count=8)
    client.force_login(frank)

    body = client.get("/api/audit/verify/").json()

    assert body["ok"] is True
    assert (body["count"], body["last_seq"], body["broken_seq"]) == (8, 8, None)


def test_verify_api_reports_the_first_broken_seq(client, admin_user):
    events_seed(count=8)
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET tool = 'forged' WHERE seq = 3")
    client.force_login(admin_user)

    body = client.get("/api/audit/verify/").json()

    assert (body["ok"], body["broken_seq"]) == (False, 3)


def test_verify_api_is_for_compliance_only(client, bob, dave):
    for user in (bob, dave):
        client.force_login(user)
        assert client.get("/api/audit/verify/").status_code == 403


def test_verify_command_prints_the_head():
    events_seed(count=5)
    out = io.StringIO()

    call_command("audit_verify", stdout=out)

    assert out.getvalue().startswith("OK: 5 events, head seq 5")


def test_verify_command_fails_at_the_edited_seq():
    events_seed(count=5)
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET actor = 'forged' WHERE seq = 4")

    with pytest.raises(CommandError, match="BROKEN at seq 4"):
        call_command("audit_verify")
