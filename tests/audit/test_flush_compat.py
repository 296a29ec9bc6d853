"""The append-only triggers do not break Django's flush between transactional tests
(tests/audit_purge.py opens the purge switch for the flush, and only for it)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from audit.models import AuditEvent
from audit.services import event_record
from audit.verify import chain_verify_db
from tests.support.people import person


def _write_committed_events(username: str) -> None:
    event_record(action="run.created", actor=person(username))
    event_record(action="run.completed", actor="agent:flush")


@pytest.mark.django_db(transaction=True)
def test_a_transactional_test_commits_audit_events():
    _write_committed_events("first")

    assert AuditEvent.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_the_next_transactional_test_starts_from_an_empty_chain():
    assert AuditEvent.objects.count() == 0
    assert not User.objects.filter(username="first").exists()

    _write_committed_events("second")

    assert list(AuditEvent.objects.values_list("seq", flat=True)) == [1, 2]
    assert chain_verify_db().ok


@pytest.mark.django_db(transaction=True)
def test_the_compliance_group_survives_the_flush():
    assert Group.objects.filter(name="compliance", permissions__codename="view_audit").exists()
