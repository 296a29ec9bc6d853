"""The ops page (/ops/): staff only, like the other restricted pages; it shows the retention
policies in force and never fails because the checkpoint tables cannot be read."""

from __future__ import annotations

from unittest import mock

import pytest
from django.test import Client
from django.urls import reverse

from agents.models import RetentionPass, RetentionPolicy
from tests.support.people import client_for, person

pytestmark = pytest.mark.django_db

OPS = reverse("ops")


def _staff():
    user = person("sam")
    user.is_staff = True
    user.save()
    return user


def test_anonymous_visitors_are_sent_to_log_in():
    response = Client().get(OPS)
    assert response.status_code == 302 and response.url.startswith(reverse("login"))


@pytest.mark.parametrize("who", ["alice", "bob", "dave", "erin", "frank"])
def test_people_who_are_not_staff_are_refused(who, request):
    user = request.getfixturevalue(who)
    response = client_for(user).get(OPS)
    assert response.status_code == 403
    home = client_for(user).get(reverse("metrics") if who == "erin" else reverse("agents:runs"))
    assert f'href="{OPS}"' not in home.content.decode()


def test_staff_and_admins_see_it_linked_from_the_nav(admin):
    for user in (_staff(), admin):
        response = client_for(user).get(OPS)
        assert response.status_code == 200
        assert f'href="{OPS}" aria-current="page">Ops</a>' in response.content.decode()


def test_it_shows_the_default_each_policy_and_the_last_passes(settings, admin):
    settings.CHECKPOINT_RETENTION_DAYS = 45
    settings.CHECKPOINT_RETENTION_ACTION = "delete"
    RetentionPolicy.objects.create(agent="retired_agent", keep_days=0, action="final")
    RetentionPass.objects.create(
        at="2026-11-30T10:00:00Z", runs_final=3, runs_deleted=1, checkpoints=40, writes=12, blobs=7
    )

    html = client_for(admin).get(OPS).content.decode()

    assert "45 days, then delete the thread&#x27;s checkpoints" in html
    assert 'data-policy="retired_agent"' in html
    assert 'retired_agent <span class="muted small">(not registered)</span>' in html
    assert "2026-11-30 10:00:00" in html
    assert '<td class="num">40</td>' in html


def test_unreadable_checkpoint_tables_are_reported_not_a_500(admin):
    with mock.patch(
        "agents.runtime.retention_sql.checkpoint_tables", side_effect=RuntimeError("gone")
    ):
        response = client_for(admin).get(OPS)
    assert response.status_code == 200
    assert "The checkpoint tables could not be read (RuntimeError: gone)" in (
        response.content.decode()
    )
