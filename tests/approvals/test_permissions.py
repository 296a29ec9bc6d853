"""Who may decide: alice, bob, carol and dave across the three demo tiers."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from approvals import policy
from approvals.permissions import user_may_decide
from approvals.selectors import approval_list_pending
from tests.support.approvals import request_approval

# (tier, requester) -> who may decide. read needs no approval (the gate passes it), so a
# read-tier approval only exists if the policy changed after the request; its group decides.
MATRIX = {
    ("read", "alice"): {"bob", "carol"},
    ("write", "alice"): {"bob", "carol"},
    ("critical", "alice"): {"bob", "carol"},
    # Four eyes: the requester never decides their own run, whatever their groups.
    ("write", "bob"): {"carol"},
    ("write", "carol"): {"bob"},
    ("critical", "carol"): {"bob"},
    ("critical", "dave"): {"bob", "carol"},
}
PEOPLE = ("alice", "bob", "carol", "dave")


@pytest.mark.parametrize(("tier", "requester"), list(MATRIX))
def test_permission_matrix_follows_the_tier_groups_and_the_requester_rule(
    demo_policy, tier, requester
):
    approval = request_approval(requester=User.objects.get(username=requester), tier=tier)

    allowed = {
        name
        for name in PEOPLE
        if user_may_decide(user=User.objects.get(username=name), approval=approval)[0]
    }

    assert allowed == MATRIX[(tier, requester)]


def test_read_needs_no_approval_while_write_and_critical_do(demo_policy):
    assert not policy.tier_requires_approval("read")
    assert policy.tier_requires_approval("write")
    assert policy.tier_requires_approval("critical")


def test_the_refusal_says_why(demo_policy, alice, carol, dave):
    approval = request_approval(requester=alice, tier="critical")

    assert user_may_decide(user=dave, approval=approval) == (
        False,
        "Only members of approvers-critical or approvers-write may decide critical actions.",
    )
    own = request_approval(requester=carol, tier="critical")
    allowed, reason = user_may_decide(user=carol, approval=own)
    assert not allowed and "four eyes" in reason


def test_the_escalation_group_may_decide_only_once_escalated(demo_policy, alice, dave):
    dave.groups.add(demo_policy["incident-commanders"])
    approval = request_approval(requester=alice, tier="critical")
    assert not user_may_decide(user=dave, approval=approval)[0]

    approval.escalated_at = approval.created_at
    assert user_may_decide(user=dave, approval=approval)[0]


def test_without_configured_tiers_the_decide_permission_applies(alice, bob, dave):
    approval = request_approval(requester=alice, tier="write")

    assert user_may_decide(user=bob, approval=approval)[0]  # holds approvals.decide
    assert not user_may_decide(user=dave, approval=approval)[0]


def test_the_queue_lists_what_each_person_may_decide(demo_policy, alice, bob, carol, dave):
    write = request_approval(requester=alice, tier="write")
    critical = request_approval(requester=alice, tier="critical")
    bobs_own = request_approval(requester=bob, tier="write")

    def queue(user):
        return set(approval_list_pending(user=user, mine=True).values_list("id", flat=True))

    assert queue(bob) == {write.id, critical.id}
    assert queue(carol) == {write.id, critical.id, bobs_own.id}
    assert queue(dave) == set()
    assert queue(alice) == set()
