"""The demo people of README.md as pytest fixtures (password ``demo`` for everyone).

| fixture | role |
| --- | --- |
| ``alice`` | requester: starts runs, may decide nothing |
| ``bob`` | approver: ``approvals.decide`` (the ``demo_policy`` fixture adds ``approvers-write``) |
| ``carol`` | senior approver: ``approvals.decide`` (``demo_policy`` adds ``approvers-write`` and
  ``approvers-critical``) |
| ``dave`` | no rights |
| ``erin`` | manager: group ``managers``, sees the approval metrics |
| ``frank`` | compliance officer: group ``compliance`` (``audit.view_audit``) |
| ``admin`` | superuser in no group |

tests/conftest.py loads this module as a plugin, so every test sees the same people. Anyone
else: ``person(username, groups=..., perms=...)``. ``client_for(user)`` and
``rest_client_for(user)`` give a Django test client and a DRF client logged in as ``user``.
"""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from rest_framework.test import APIClient

from audit.services import compliance_group_ensure
from console.metrics import MANAGERS_GROUP
from tests.support.factories import UserFactory

DECIDE = "approvals.decide"


def person(
    username: str,
    *,
    groups: Iterable[Group | str] = (),
    perms: Iterable[str] = (),
    superuser: bool = False,
) -> User:
    """A person with the demo password, in ``groups`` (objects or names, created if missing),
    holding ``perms`` (``"app_label.codename"``)."""
    user = UserFactory(username=username, is_superuser=superuser, is_staff=superuser)
    for group in groups:
        user.groups.add(
            group if isinstance(group, Group) else Group.objects.get_or_create(name=group)[0]
        )
    for name in perms:
        app_label, codename = name.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    return user


@pytest.fixture
def alice(db) -> User:
    return person("alice")


@pytest.fixture
def bob(db) -> User:
    return person("bob", perms=[DECIDE])


@pytest.fixture
def carol(db) -> User:
    return person("carol", perms=[DECIDE])


@pytest.fixture
def dave(db) -> User:
    return person("dave")


@pytest.fixture
def erin(db) -> User:
    """A manager: member of the "managers" group that console's migration creates."""
    return person("erin", groups=[MANAGERS_GROUP])


@pytest.fixture
def frank(db) -> User:
    """A compliance officer (the group is recreated after a test flush if need be)."""
    return person("frank", groups=[compliance_group_ensure()])


@pytest.fixture
def admin(db) -> User:
    """The Django admin: a superuser in no group."""
    return person("admin", superuser=True)


def client_for(user: User) -> Client:
    """A Django test client logged in as ``user`` (the console's pages)."""
    client = Client()
    client.force_login(user)
    return client


def rest_client_for(user: User) -> APIClient:
    """A DRF test client authenticated as ``user`` (the JSON API, no token needed)."""
    client = APIClient()
    client.force_authenticate(user=user)
    return client
