"""Audit rows are never updated or deleted: the model refuses, and the database refuses."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from audit.models import AuditEvent
from audit.services import event_record, events_seed

pytestmark = pytest.mark.django_db


def _refused(sql: str, params: list | None = None) -> str:
    with pytest.raises(DatabaseError) as excinfo, transaction.atomic(), connection.cursor() as c:
        c.execute(sql, params)
    return str(excinfo.value)


def test_the_model_refuses_to_save_an_existing_event(bob):
    event = event_record(action="run.created", actor=bob)
    event.action = "run.cancelled"

    with pytest.raises(PermissionError):
        event.save()


def test_the_model_refuses_to_delete_an_event(bob):
    event = event_record(action="run.created", actor=bob)

    with pytest.raises(PermissionError):
        event.delete()


def test_the_manager_refuses_bulk_update_and_delete():
    events_seed(count=3)

    with pytest.raises(PermissionError):
        AuditEvent.objects.filter(seq=1).update(action="x")
    with pytest.raises(PermissionError):
        AuditEvent.objects.all().delete()


def test_the_database_refuses_update():
    events_seed(count=3)

    message = _refused("UPDATE audit_auditevent SET action = 'forged' WHERE seq = 2")

    assert "append-only" in message
    assert AuditEvent.objects.get(seq=2).action == "run.created"


def test_the_database_refuses_delete():
    events_seed(count=3)

    assert "append-only" in _refused("DELETE FROM audit_auditevent WHERE seq = 3")
    assert AuditEvent.objects.count() == 3


def test_the_database_refuses_truncate():
    events_seed(count=3)
    # SQLite has no TRUNCATE: its form is an unqualified DELETE (the "truncate optimisation"),
    # which SQLite turns off when the table has a DELETE trigger.
    sql = (
        "TRUNCATE audit_auditevent"
        if connection.vendor == "postgresql"
        else "DELETE FROM audit_auditevent"
    )

    assert "append-only" in _refused(sql)
    assert AuditEvent.objects.count() == 3


def test_the_purge_setting_never_allows_update():
    events_seed(count=2)
    switch_on = (
        "SELECT set_config('audit.allow_purge', 'on', true)"
        if connection.vendor == "postgresql"
        else "INSERT INTO audit_purge_switch (id) VALUES (1)"
    )

    with pytest.raises(DatabaseError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(switch_on)
        cursor.execute("UPDATE audit_auditevent SET action = 'forged' WHERE seq = 1")
    assert AuditEvent.objects.get(seq=1).action == "run.created"


def test_the_triggers_are_installed():
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = 'audit_auditevent'::regclass"
                " AND NOT tgisinternal AND tgenabled <> 'D'"
            )
            expected = {"audit_event_no_update_delete", "audit_event_no_truncate"}
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger'"
                " AND tbl_name = 'audit_auditevent'"
            )
            expected = {"audit_event_no_update", "audit_event_no_delete"}
        assert {row[0] for row in cursor.fetchall()} == expected


def test_the_compliance_group_holds_the_audit_permission():
    from django.contrib.auth.models import Group

    group = Group.objects.get(name="compliance")

    assert group.permissions.filter(content_type__app_label="audit", codename="view_audit").exists()
