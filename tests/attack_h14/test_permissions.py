"""Hostile review (issue 14): who may erase, and what the right to erase lets one read."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from agents.erasure import runs_erase
from approvals.models import AgentRun
from tests.support.people import client_for, person

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]


def test_the_command_refuses_to_name_someone_who_may_not_erase(driven, dave):
    """``erase --by dave``: the audit's actor is "the person answerable for it", yet the
    command never asks whether that person may erase (dave has no agents.erase_run), so the
    trail shows dave erasing, which the admin would have refused him."""
    assert not dave.has_perm("agents.erase_run")
    with pytest.raises(CommandError):
        call_command("erase", "--run", str(driven.run.pk), "--by", "dave", "--reason", "asked")
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is None


def test_the_service_refuses_an_eraser_without_the_permission(driven, dave):
    """runs_erase itself takes any user: every caller must remember the check."""
    with pytest.raises(Exception):  # noqa: B017, PT011 - any refusal will do
        runs_erase(runs=[driven.run], user=dave, reason="asked")
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is None


def test_the_right_to_erase_alone_does_not_read_every_run_s_personal_data(driven):
    """ErasableAgentRunAdmin grants view to whoever holds agents.erase_run, so a staff member
    given only that right (not compliance, not agents.view_all) reads every run's opened
    input in the admin: the right to destroy data became the right to read it."""
    eraser = person("eve", perms=["agents.erase_run"])
    eraser.is_staff = True
    eraser.save()
    page = client_for(eraser).get(f"/admin/approvals/agentrun/{driven.run.pk}/change/")
    assert driven.email not in page.content.decode(), "the eraser reads the run's subject"
