"""Claims and assignments (approvals/services/claims.py): a soft lock that lapses, assigned by
an admin or a tier lead, audited, and never in the way of a decision."""

from __future__ import annotations

import datetime as dt

import pytest
import time_machine
from django.contrib.auth.models import Group

from approvals.claim_selectors import approval_claim_live
from approvals.models import ApprovalClaim, ApprovalRequest, RiskTier
from approvals.selectors import approval_get
from approvals.services import (
    ClaimConflict,
    ClaimForbidden,
    ClaimInvalid,
    approval_assign,
    approval_claim,
    approval_claim_release,
    approval_decide,
    approval_unassign,
    policy_snapshot,
)
from approvals.services import claims as claims_module
from audit.models import AuditEvent
from tests.support.factories import ApprovalFactory, RunFactory

T0 = dt.datetime(2026, 3, 2, 8, 1, tzinfo=dt.UTC)
CLAIM = dt.timedelta(seconds=900)


@pytest.fixture
def clock():
    with time_machine.travel(T0, tick=False) as traveller:
        yield traveller


@pytest.fixture
def critical(demo_policy, alice, clock) -> ApprovalRequest:
    """A pending critical approval of alice's run: bob and carol may both vote on it."""
    return ApprovalFactory(run=RunFactory(requested_by=alice), tier="critical")


@pytest.fixture
def lead(demo_policy, erin) -> object:
    """erin leads the critical tier."""
    leads = Group.objects.create(name="critical-leads")
    RiskTier.objects.filter(name="critical").update(lead_group=leads)
    erin.groups.add(leads)
    return erin


def _events(action: str, approval: ApprovalRequest) -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action, approval_id=approval.pk).order_by("seq"))


# --- claim, renew, release, lapse -------------------------------------------------------------


def test_a_reviewer_claims_a_pending_approval_until_the_claim_lapses(critical, bob):
    claim = approval_claim(approval=critical, user=bob)

    assert (claim.user, claim.since, claim.until, claim.assigned_by) == (bob, T0, T0 + CLAIM, None)
    assert claims_module.claim_text(claim) == "bob is looking at this since 08:01"
    [event] = _events("approval.claimed", critical)
    assert event.actor_username == "bob"
    assert event.data == {"user": "bob", "until": (T0 + CLAIM).isoformat(), "renewed": False}


def test_claiming_again_renews_the_claim_and_keeps_since(critical, bob, clock):
    approval_claim(approval=critical, user=bob)
    clock.shift(dt.timedelta(minutes=10))

    claim = approval_claim(approval=critical, user=bob)

    assert claim.since == T0
    assert claim.until == T0 + dt.timedelta(minutes=10) + CLAIM
    assert ApprovalClaim.objects.count() == 1
    assert [e.data["renewed"] for e in _events("approval.claimed", critical)] == [False, True]


def test_a_lapsed_claim_reads_as_free_and_another_reviewer_takes_it(critical, bob, carol, clock):
    approval_claim(approval=critical, user=bob)
    clock.shift(CLAIM - dt.timedelta(seconds=1))
    assert approval_claim_live(approval=approval_get(pk=critical.pk, fetched_by=carol)).user == bob

    clock.shift(dt.timedelta(seconds=1))  # at ``until``: lapsed
    assert approval_claim_live(approval=approval_get(pk=critical.pk, fetched_by=carol)) is None
    assert _events("approval.released", critical) == []  # lapsing is a time, not a change

    claim = approval_claim(approval=critical, user=carol)
    assert (claim.user, claim.since) == (carol, T0 + CLAIM)
    assert ApprovalClaim.objects.count() == 1


def test_a_live_claim_of_someone_else_refuses_a_second_claim_naming_who(critical, bob, carol):
    approval_claim(approval=critical, user=bob)

    with pytest.raises(ClaimConflict) as refused:
        approval_claim(approval=critical, user=carol)

    assert refused.value.status_code == 409
    assert "bob is looking at this since 08:01" in refused.value.message
    assert ApprovalClaim.objects.get().user == bob
    assert len(_events("approval.claimed", critical)) == 1


def test_the_claimer_releases_the_claim_and_nobody_else_can(critical, bob, carol):
    approval_claim(approval=critical, user=bob)
    with pytest.raises(ClaimConflict):
        approval_claim_release(approval=critical, user=carol)

    approval_claim_release(approval=critical, user=bob)

    assert not ApprovalClaim.objects.exists()
    [event] = _events("approval.released", critical)
    assert (event.actor_username, event.data) == (
        "bob",
        {"user": "bob", "until": (T0 + CLAIM).isoformat()},
    )
    with pytest.raises(ClaimConflict, match="no claim"):
        approval_claim_release(approval=critical, user=bob)


@pytest.mark.parametrize("who", ["alice", "dave"])
def test_only_someone_who_may_decide_the_approval_may_claim_it(critical, who, request):
    user = request.getfixturevalue(who)
    with pytest.raises(ClaimForbidden) as refused:
        approval_claim(approval=critical, user=user)
    assert refused.value.status_code == 403
    assert not ApprovalClaim.objects.exists()


def test_a_decided_or_expired_approval_can_be_neither_claimed_released_nor_assigned(
    critical, bob, admin, clock
):
    approval_claim(approval=critical, user=bob)
    ApprovalRequest.objects.filter(pk=critical.pk).update(status="rejected")
    critical.refresh_from_db()
    for act in (
        lambda: approval_claim(approval=critical, user=bob),
        lambda: approval_claim_release(approval=critical, user=bob),
        lambda: approval_assign(approval=critical, username="carol", by=admin),
        lambda: approval_unassign(approval=critical, by=admin),
    ):
        with pytest.raises(ClaimConflict, match="already rejected"):
            act()
    assert approval_claim_live(approval=critical) is None  # a decided approval shows none

    expired = ApprovalFactory(run=critical.run, tier="critical")
    clock.shift(dt.timedelta(hours=3))
    with pytest.raises(ClaimConflict, match="expired"):
        approval_claim(approval=expired, user=bob)


# --- conditional writes -----------------------------------------------------------------------


def test_the_conditional_update_takes_only_a_lapsed_or_own_claim(critical, bob, carol, clock):
    approval_claim(approval=critical, user=bob)
    later = T0 + dt.timedelta(minutes=1)

    taken = claims_module._take_if_free(approval=critical, user=carol, now=later, until=later)
    assert taken == 0
    assert ApprovalClaim.objects.get().user == bob

    lapsed = T0 + CLAIM
    taken = claims_module._take_if_free(approval=critical, user=carol, now=lapsed, until=lapsed)
    assert taken == 1
    assert ApprovalClaim.objects.get().user == carol


def test_two_reviewers_inserting_the_first_claim_at_once_cannot_both_win(
    critical, bob, carol, monkeypatch
):
    """carol's UPDATE finds no row; bob's INSERT lands before hers: the unique approval column
    refuses hers, and she is told who holds it."""
    update = claims_module._take_if_free

    def bob_first(**kwargs):
        found = update(**kwargs)
        ApprovalClaim.objects.create(
            approval=critical, user=bob, since=kwargs["now"], until=kwargs["until"]
        )
        return found

    monkeypatch.setattr(claims_module, "_take_if_free", bob_first)

    with pytest.raises(ClaimConflict, match="bob is looking at this"):
        approval_claim(approval=critical, user=carol)
    # (bob's row was written inside carol's transaction here, so it went with her refusal.)
    assert _events("approval.claimed", critical) == []


# --- assignment -------------------------------------------------------------------------------


def test_an_admin_assigns_an_approval_and_the_assignment_does_not_lapse(
    critical, admin, bob, carol, clock
):
    approval_claim(approval=critical, user=bob)

    claim = approval_assign(approval=critical, username="carol", by=admin)

    assert (claim.user, claim.assigned_by, claim.since, claim.until) == (carol, admin, T0, None)
    assert claims_module.claim_text(claim) == "assigned to carol by admin at 08:01"
    [event] = _events("approval.assigned", critical)
    assert event.actor_username == "admin"
    assert event.data == {"user": "carol", "until": None, "replaced": "bob"}
    clock.shift(dt.timedelta(hours=1))  # four claim lifetimes, still before the expiry
    assert approval_claim_live(approval=ApprovalRequest.objects.get(pk=critical.pk)) == claim
    with pytest.raises(ClaimConflict, match="assigned to carol by admin"):
        approval_claim(approval=critical, user=bob)
    # carol's own claim leaves her assignment as it is (it does not turn into a lapsing claim).
    assert approval_claim(approval=critical, user=carol).until is None


def test_a_tier_lead_assigns_and_unassigns_and_sees_the_tiers_approvals(critical, lead, carol):
    assert approval_get(pk=critical.pk, fetched_by=lead) == critical

    approval_assign(approval=critical, username="carol", by=lead)
    approval_unassign(approval=critical, by=lead)

    assert not ApprovalClaim.objects.exists()
    [event] = _events("approval.unassigned", critical)
    assert (event.actor_username, event.data) == ("erin", {"user": "carol", "until": None})
    with pytest.raises(ClaimConflict, match="not assigned"):
        approval_unassign(approval=critical, by=lead)


def test_a_lead_of_another_tier_and_a_reviewer_may_not_assign(demo_policy, lead, alice, bob):
    write = ApprovalFactory(run=RunFactory(requested_by=alice), tier="write")
    for who in (lead, bob):
        with pytest.raises(ClaimForbidden, match="admin or a lead of the write tier"):
            approval_assign(approval=write, username="carol", by=who)
    assert not ApprovalClaim.objects.exists()


@pytest.mark.parametrize(
    ("username", "why"),
    [
        ("dave", "dave may not decide critical actions."),
        ("alice", "alice requested this run and may not decide it (four eyes)."),
        ("nobody", "No active user is named 'nobody'."),
        ("", "This field is required."),
    ],
)
def test_an_assignee_who_may_not_decide_is_refused_naming_why(critical, admin, username, why):
    with pytest.raises(ClaimInvalid) as refused:
        approval_assign(approval=critical, username=username, by=admin)
    assert refused.value.status_code == 400
    assert refused.value.errors == {"user": why}
    assert not ApprovalClaim.objects.exists()


def test_the_assignee_hands_an_assignment_back(critical, admin, carol):
    approval_assign(approval=critical, username="carol", by=admin)

    approval_claim_release(approval=critical, user=carol)

    assert not ApprovalClaim.objects.exists()
    [event] = _events("approval.released", critical)
    assert event.data == {"user": "carol", "until": None, "assigned_by": "admin"}


def test_the_tier_admin_snapshot_names_the_lead_group(critical, lead):
    assert policy_snapshot(RiskTier.objects.get(name="critical"))["lead_group"] == "critical-leads"


# --- a claim never blocks a decision ----------------------------------------------------------


def test_a_decision_while_someone_else_holds_the_claim_goes_through_and_says_so(
    critical, bob, carol
):
    approval_claim(approval=critical, user=bob)

    approval_decide(
        approval=critical,
        user=carol,
        decision="reject",
        seen_hash=critical.payload_hash,
        message="no",
    )

    critical.refresh_from_db()
    assert critical.status == ApprovalRequest.Status.REJECTED
    [voted] = _events("approval.voted", critical)
    assert voted.data["claimed_by"] == "bob"
    assert approval_claim_live(approval=critical) is None


def test_the_claimers_own_vote_and_a_vote_after_the_lapse_name_no_claim(
    critical, bob, carol, clock
):
    approval_claim(approval=critical, user=bob)
    approval_decide(
        approval=critical, user=bob, decision="approve", seen_hash=critical.payload_hash
    )
    clock.shift(CLAIM)
    approval_decide(
        approval=critical, user=carol, decision="approve", seen_hash=critical.payload_hash
    )

    votes = _events("approval.voted", critical)
    assert [("claimed_by" in v.data) for v in votes] == [False, False]
    critical.refresh_from_db()
    assert critical.status == ApprovalRequest.Status.APPROVED
