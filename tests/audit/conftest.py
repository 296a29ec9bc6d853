"""Audit test helpers: a compliance officer, tamper tools, chain seeding."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.contrib.auth.models import User
from django.db import connection

from audit.services import COMPLIANCE_GROUP, compliance_group_ensure
from tests import audit_purge

# tests/conftest.py enables this plugin for the whole suite; installing here too keeps
# `pytest tests/audit` self-sufficient (install() is idempotent).
audit_purge.install()


@pytest.fixture
def erin(db) -> User:
    """Erin is a compliance officer."""
    group = compliance_group_ensure()
    assert group.name == COMPLIANCE_GROUP
    user = User.objects.create_user(username="erin", password="demo", email="erin@example.com")
    user.groups.add(group)
    return user


@contextmanager
def triggers_disabled() -> Iterator[None]:
    """Switch the append-only triggers off inside the current transaction (tamper tests only);
    the test's rollback restores them."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE audit_auditevent DISABLE TRIGGER USER")
            yield
            cursor.execute("ALTER TABLE audit_auditevent ENABLE TRIGGER USER")
        else:
            cursor.execute("DROP TRIGGER audit_event_no_update")
            cursor.execute("DROP TRIGGER audit_event_no_delete")
            yield
            # Recreated by the rollback of the test's transaction (SQLite DDL is transactional).
