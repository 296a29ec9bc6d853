"""The autonomy advice page (/autonomy/), its API, and applying the advice: who may see and
apply it, what applying writes (the rule with its evidence, the audit event, a new policy
version), and what it refuses (stale advice: 409; no compensation: 409; a reviewer: 403)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from approvals import autonomy
from approvals.autonomy_models import AutonomyRule
from approvals.models import PolicyVersion, RiskTier
from approvals.services.autonomy_advice import AutonomyError, autonomy_advice_apply
from audit.models import AuditEvent
from tests.support.autonomy_advice import closed_approvals
from tests.support.people import client_for, person, rest_client_for

pytestmark = pytest.mark.django_db

TOOL = "refund_order"


@pytest.fixture
def compensation():
    """The tool registry's answer (A tool without compensation may not run unattended)."""
    known: dict[str, bool] = {}
    before = autonomy._compensation_provider
    autonomy.compensation_provider_set(lambda tool: known.get(tool, False))
    yield known
    autonomy.compensation_provider_set(before)


@pytest.fixture
def promotable(bob):
    """60 decisions of refund_order: 58 approved, 1 edited, 1 rejected (96.7%: promote)."""
    return closed_approvals(by=bob, tool=TOOL, approve=58, edit=1, reject=1)


def _apply(client, **post):
    post.setdefault("scope", f"tool:{TOOL}")
    return client.post(reverse("autonomy-apply"), post)


def _version() -> int:
    row = PolicyVersion.objects.filter(pk=1).first()
    return row.number if row else 0


def test_a_manager_sees_the_advice_with_its_figures_and_evidence(erin, promotable):
    response = client_for(erin).get(reverse("autonomy"))

    page = response.content.decode()
    assert response.status_code == 200
    assert f'data-key="tool:{TOOL}" data-advice="promote"' in page
    assert "approve rate 96.7% (58 of 60) ≥ 95.0%" in page
    assert 'href="/autonomy/"' in page  # the nav link
    assert "Apply: sampled" not in page  # a manager sees, an admin applies


def test_the_tier_tab_shows_the_tiers(erin, promotable):
    page = client_for(erin).get(reverse("autonomy"), {"scope": "tier", "days": "7"})
    assert 'data-key="tier:write"' in page.content.decode()


def test_a_bad_window_is_a_400_naming_days(erin):
    response = client_for(erin).get(reverse("autonomy"), {"days": "0"})
    assert response.status_code == 400
    assert "days must be in 1..365" in response.content.decode()


def test_a_reviewer_sees_no_advice_and_no_nav_link(bob):
    as_bob = client_for(bob)
    assert as_bob.get(reverse("autonomy")).status_code == 403
    assert 'href="/autonomy/"' not in as_bob.get(reverse("approvals:queue")).content.decode()


def test_the_api_gives_the_same_figures(erin, promotable):
    response = rest_client_for(erin).get("/api/autonomy/advice/", {"days": 30})

    assert response.status_code == 200
    body = response.json()
    [tool] = [row for row in body["tools"] if row["key"] == TOOL]
    assert (tool["recommendation"], tool["target_mode"], tool["mode"]) == (
        "promote",
        "sampled",
        "ask",
    )
    assert tool["figures"]["volume"] == 60
    assert tool["figures"]["outcomes"]["approve"] == 58
    assert tool["figures"]["rates"]["approve"] == pytest.approx(58 / 60, abs=1e-4)
    assert body["thresholds"]["promote_min_volume"] == 50


def test_the_api_refuses_a_bad_window_naming_days_and_a_reviewer(erin, bob):
    assert "days" in rest_client_for(erin).get("/api/autonomy/advice/?days=x").json()["errors"]
    assert rest_client_for(bob).get("/api/autonomy/advice/").status_code == 403


def test_applying_a_promotion_writes_the_rule_with_its_evidence_audit_and_a_new_version(
    admin, promotable, compensation
):
    compensation[TOOL] = True
    version = _version()

    response = _apply(client_for(admin), target_mode="sampled", sample_percent="20", days="30")

    assert response.status_code == 302
    rule = AutonomyRule.objects.get(tool=TOOL)
    assert (rule.mode, rule.sample_percent) == ("sampled", 20)
    assert rule.evidence["figures"]["volume"] == 60
    assert rule.evidence["figures"]["outcomes"]["approve"] == 58
    assert rule.evidence["recommendation"] == "promote"
    assert rule.evidence["window"]["days"] == 30
    assert _version() == version + 1
    event = AuditEvent.objects.get(action="autonomy.changed")
    assert event.data["before"] is None
    assert event.data["after"]["mode"] == "sampled"
    assert event.data["evidence"]["figures"]["volume"] == 60
    assert event.data["policy_version"] == version + 1


def test_applying_advice_that_no_longer_says_so_is_refused_with_409(admin, bob, compensation):
    compensation[TOOL] = True
    closed_approvals(by=bob, tool=TOOL, approve=49)  # keep: too little volume

    response = _apply(client_for(admin), target_mode="sampled")

    assert response.status_code == 409
    assert "no longer says sampled" in response.content.decode()
    assert not AutonomyRule.objects.exists()
    assert not AuditEvent.objects.filter(action="autonomy.changed").exists()


@pytest.mark.parametrize("registry", ["no", "unknown"])
def test_a_tool_without_compensation_is_not_promoted(admin, promotable, compensation, registry):
    if registry == "unknown":
        autonomy.compensation_provider_set(None)

    response = _apply(client_for(admin), target_mode="sampled")

    assert response.status_code == 409
    assert "no compensating tool" in response.content.decode()
    assert not AutonomyRule.objects.exists()


def test_a_reviewer_and_a_manager_cannot_apply(bob, erin, promotable, compensation):
    compensation[TOOL] = True
    assert _apply(client_for(bob), target_mode="sampled").status_code == 403
    assert _apply(client_for(erin), target_mode="sampled").status_code == 403
    assert not AutonomyRule.objects.exists()


def test_staff_with_the_permission_may_apply(promotable, compensation):
    compensation[TOOL] = True
    keeper = person("keeper", perms=["approvals.change_autonomyrule"])

    assert _apply(client_for(keeper), target_mode="sampled").status_code == 302
    assert AutonomyRule.objects.get(tool=TOOL).mode == "sampled"


def test_starting_shadow_for_a_class_that_asks_keeps_the_proposed_settings(admin, bob):
    closed_approvals(by=bob, tool=TOOL, approve=5)

    response = _apply(
        client_for(admin), target_mode="shadow", sample_percent="25", confidence_below="0.8"
    )

    assert response.status_code == 302
    rule = AutonomyRule.objects.get(tool=TOOL)
    assert (rule.mode, rule.sample_percent, str(rule.confidence_below)) == ("shadow", 25, "0.800")
    assert rule.evidence["figures"]["volume"] == 5


def test_shadow_is_started_only_from_ask(admin, bob):
    AutonomyRule.objects.create(tool=TOOL, mode="sampled")
    closed_approvals(by=bob, tool=TOOL, approve=5)

    assert _apply(client_for(admin), target_mode="shadow").status_code == 409
    assert AutonomyRule.objects.get(tool=TOOL).mode == "sampled"


def test_applying_a_demotion_sets_ask_and_audits_what_it_was(admin, bob):
    AutonomyRule.objects.create(tool=TOOL, mode="sampled", sample_percent=30)
    closed_approvals(by=bob, tool=TOOL, approve=38, reject=12)  # 24% rejected

    response = _apply(client_for(admin), target_mode="ask")

    assert response.status_code == 302
    assert AutonomyRule.objects.get(tool=TOOL).mode == "ask"
    event = AuditEvent.objects.get(action="autonomy.changed")
    assert (event.data["before"]["mode"], event.data["after"]["mode"]) == ("sampled", "ask")
    assert "reject rate 24.0% (12 of 50) ≥ 20.0%" in event.data["evidence"]["why"]


@pytest.fixture
def write_tools():
    """The registry's tools (and their code default tiers) for this test: two, both "write"."""
    before = autonomy._tools_provider
    autonomy.tools_provider_set(lambda: {"refund_order": "write", "send_email": "write"})
    yield
    autonomy.tools_provider_set(before)


def test_a_tier_is_promoted_only_when_every_tool_in_it_has_compensation(
    admin, bob, compensation, write_tools
):
    RiskTier.objects.create(name="write", level=1)
    closed_approvals(by=bob, tool="refund_order", approve=40)
    closed_approvals(by=bob, tool="send_email", approve=20)
    compensation["refund_order"] = True

    refused = _apply(client_for(admin), scope="tier:write", target_mode="sampled")
    compensation["send_email"] = True
    applied = _apply(client_for(admin), scope="tier:write", target_mode="sampled")

    assert (refused.status_code, applied.status_code) == (409, 302)
    assert AutonomyRule.objects.get(tier__name="write").mode == "sampled"


@pytest.mark.parametrize(
    ("post", "field"),
    [
        ({"scope": "toolz:x", "target_mode": "ask"}, "scope"),
        ({"scope": "tier:nope", "target_mode": "ask"}, "scope"),
        ({"target_mode": "fast"}, "target_mode"),
        ({"target_mode": "shadow", "sample_percent": "101"}, "sample_percent"),
        ({"target_mode": "shadow", "confidence_below": "2"}, "confidence_below"),
        ({"target_mode": "shadow", "days": "0"}, "days"),
    ],
)
def test_bad_input_is_refused_naming_the_field(admin, post, field):
    post.setdefault("scope", f"tool:{TOOL}")
    with pytest.raises(AutonomyError) as refused:
        autonomy_advice_apply(user=admin, **post)
    assert field in refused.value.errors
    assert _apply(client_for(admin), **post).status_code == 400
