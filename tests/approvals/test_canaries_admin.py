"""Canary plans in the admin: compliance configures them, the form keeps four eyes, and
"Plant one now" plants."""

from __future__ import annotations

import pytest

from approvals.canary_admin import CanaryPlanAdminForm
from approvals.models import Canary, CanaryPlan, RiskTier
from audit.models import AuditEvent
from tests.approvals.canary_support import plan_for
from tests.support.people import client_for

pytestmark = pytest.mark.django_db


def _form(**data) -> CanaryPlanAdminForm:
    write = RiskTier.objects.get(name="write")
    return CanaryPlanAdminForm(data={"tier": write.pk, "per_day": 2, "is_active": "on", **data})


def test_the_form_refuses_a_requester_who_may_decide_the_tier(demo_policy, bob, alice):
    form = _form(requested_as=bob.pk)
    assert not form.is_valid()
    assert "may decide write approvals" in form.errors["requested_as"][0]
    assert _form(requested_as=alice.pk).is_valid()


def test_the_form_keeps_only_known_templates(demo_policy):
    form = _form(templates=["refund_unknown_account"])
    assert form.is_valid(), form.errors
    assert form.cleaned_data["templates"] == ["refund_unknown_account"]
    assert not _form(templates=["delete_everything"]).is_valid()


def test_plant_one_now_plants_and_saving_is_audited(demo_policy, admin, alice):
    client = client_for(admin)
    response = client.post(
        "/admin/approvals/canaryplan/add/",
        {
            "tier": RiskTier.objects.get(name="write").pk,
            "per_day": 3,
            "requested_as": alice.pk,
            "is_active": "on",
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    plan = CanaryPlan.objects.get()
    assert plan.created_by == admin
    assert AuditEvent.objects.filter(action="canary.plan_saved").count() == 1
    response = client.post(
        "/admin/approvals/canaryplan/",
        {"action": "plant_now", "_selected_action": [plan.pk]},
        follow=True,
    )
    assert response.status_code == 200
    assert Canary.objects.filter(plan=plan).count() == 1


def test_reviewers_do_not_reach_the_plans(demo_policy, bob):
    plan_for("write")
    bob.is_staff = True
    bob.save(update_fields=["is_staff"])
    assert client_for(bob).get("/admin/approvals/canaryplan/").status_code == 403
