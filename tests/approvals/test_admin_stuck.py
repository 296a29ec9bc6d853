"""A tier's "stuck after" threshold in the admin, and the stuck items it lists read-only."""

from __future__ import annotations

import pytest

from approvals.models import RiskTier, StuckItem
from tests.approvals.test_admin_forms import post_tier

pytestmark = pytest.mark.django_db


def test_the_stuck_threshold_is_set_in_the_tier_form(demo_policy, admin_client):
    response = post_tier(admin_client, demo_policy, stuck_after_seconds=900)
    assert response.status_code == 302, response.content.decode()[:2000]
    assert RiskTier.objects.get(name="write").stuck_after_seconds == 900


def test_a_form_without_the_threshold_keeps_the_stored_one(demo_policy, admin_client):
    RiskTier.objects.filter(name="write").update(stuck_after_seconds=1234)
    for posted in ({}, {"stuck_after_seconds": ""}):
        response = post_tier(admin_client, demo_policy, **posted)
        assert response.status_code == 302, response.content.decode()[:2000]
        assert RiskTier.objects.get(name="write").stuck_after_seconds == 1234


def test_new_tiers_default_to_four_hours():
    assert RiskTier._meta.get_field("stuck_after_seconds").default == 4 * 3600


def test_stuck_items_are_listed_but_never_added_or_changed_in_the_admin(admin_client):
    response = admin_client.get("/admin/approvals/stuckitem/")
    assert response.status_code == 200
    assert admin_client.get("/admin/approvals/stuckitem/add/").status_code == 403
    assert not StuckItem.objects.exists()
