"""Shared people: alice requests runs, bob approves "write", carol approves "critical",
dave may approve nothing."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User

# Lets the test flush empty the append-only audit table (see tests/audit_purge.py).
pytest_plugins = ["tests.audit_purge"]


def _user(username: str, *groups: Group, perms: tuple[str, ...] = ()) -> User:
    user = User.objects.create_user(
        username=username, password="demo", email=f"{username}@example.com"
    )
    for group in groups:
        user.groups.add(group)
    for codename in perms:
        app_label, code = codename.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=code)
        )
    return user


@pytest.fixture
def alice(db) -> User:
    return _user("alice")


@pytest.fixture
def bob(db) -> User:
    return _user("bob", perms=("approvals.decide",))


@pytest.fixture
def carol(db) -> User:
    return _user("carol", perms=("approvals.decide",))


@pytest.fixture
def dave(db) -> User:
    return _user("dave")


@pytest.fixture(scope="session", autouse=True)
def _close_checkpointer_before_db_teardown(django_db_setup, django_db_blocker):
    """The checkpointer's pool holds connections to the test database; close it first."""
    yield
    from agents.runtime.checkpoint import checkpointer_reset

    checkpointer_reset()
