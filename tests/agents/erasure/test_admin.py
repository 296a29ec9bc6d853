"""The admin's "Erase personal data": compliance may (reason asked, result shown), dave may not."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission

from agents.models import Effect, Erasure
from approvals.models import AgentRun
from tests.support.people import client_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("queued")]

CHANGELIST = "/admin/approvals/agentrun/"
ERASE = "/admin/approvals/agentrun/erase/"


@pytest.fixture
def staff_frank(frank):
    frank.is_staff = True  # a compliance officer who uses the admin
    frank.save()
    return frank


@pytest.fixture
def staff_dave(dave):
    """Staff who may look at runs in the admin, but not erase them."""
    dave.is_staff = True
    dave.save()
    dave.user_permissions.add(Permission.objects.get(codename="view_agentrun"))
    return dave


def test_compliance_may_erase_from_the_admin_and_dave_may_not(driven, staff_frank, staff_dave):
    run = driven.run
    frank = client_for(staff_frank)
    listing = frank.get(CHANGELIST)
    assert listing.status_code == 200
    assert "Erase personal data" in listing.content.decode()

    chosen = frank.post(CHANGELIST, {"action": "erase_personal_data", "_selected_action": [run.pk]})
    assert chosen.status_code == 302 and chosen["Location"].startswith(ERASE)
    confirm = frank.get(chosen["Location"])
    body = confirm.content.decode()
    assert confirm.status_code == 200 and 'data-erasure="confirm"' in body
    assert str(run.pk) in body and 'name="reason"' in body
    assert AgentRun.objects.get(pk=run.pk).erased_at is None  # nothing before the confirmation

    no_reason = frank.post(ERASE, {"run": [run.pk], "reason": "  "})
    assert no_reason.status_code == 400 and "reason is required" in no_reason.content.decode()

    done = frank.post(ERASE, {"run": [run.pk], "reason": "art. 17 request"})
    assert done.status_code == 200 and 'data-erasure="done"' in done.content.decode()
    assert f"erased <code>{run.pk}</code>" in done.content.decode()
    assert AgentRun.objects.get(pk=run.pk).erased_at is not None
    assert Erasure.objects.get().username == "frank"

    dave = client_for(staff_dave)
    assert dave.get(CHANGELIST).status_code == 200
    assert "Erase personal data" not in dave.get(CHANGELIST).content.decode()
    assert dave.get(f"{ERASE}?ids={run.pk}").status_code == 403
    assert dave.post(ERASE, {"run": [run.pk], "reason": "x"}).status_code == 403
    action = {"action": "erase_personal_data", "_selected_action": [run.pk]}
    assert dave.post(CHANGELIST, action).status_code == 403


def test_the_admin_lists_refusals_and_erases_nothing(driven, staff_frank):
    Effect.objects.filter(run=driven.run).update(status=Effect.Status.IN_DOUBT)
    frank = client_for(staff_frank)
    refused = frank.post(ERASE, {"run": [driven.run.pk], "reason": "request"})
    body = refused.content.decode()
    assert refused.status_code == 409 and 'data-erasure="refused"' in body
    assert "is in_doubt: it must be settled first" in body
    assert AgentRun.objects.get(pk=driven.run.pk).erased_at is None
