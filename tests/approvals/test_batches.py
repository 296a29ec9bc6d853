"""Batches: related pending approvals (same agent, tool, tier) decided together, each item on
its own payload hash, quorum and audit events (approvals/services/batches.py)."""

from __future__ import annotations

import pytest
from django.db import transaction

from approvals.batch_selectors import batch_get, batch_list, batch_offered
from approvals.models import ApprovalRequest, ApprovalVote, RiskTier
from approvals.services import DecisionInvalid, policy_change_record
from approvals.services.batches import approval_batch_decide
from approvals.services.rounds import round_start
from audit.models import AuditEvent
from audit.private import event_data_open
from tests.support.approvals import decide, request_approval
from tests.support.factories import RunFactory
from tests.support.queue import tasks_named

ADVANCE = "agents.tasks.run_advance"
KEY = {"agent": "refund_agent", "tool": "refund_order"}


def refunds(requester, tier: str, count: int = 3) -> list[ApprovalRequest]:
    """``count`` refunds of one incident, each on its own run of ``requester``."""
    return [
        request_approval(
            requester=requester, tier=tier, args={"order_id": f"A-{n}", "amount": 100 + n}
        )
        for n in range(1, count + 1)
    ]


def seen(approvals: list[ApprovalRequest]) -> list[tuple[int, str]]:
    return [(a.pk, a.payload_hash) for a in approvals]


def new_round(approval: ApprovalRequest, by, **args) -> None:
    """Someone's edit short of quorum: new args, new payload hash."""
    with transaction.atomic():
        locked = ApprovalRequest.objects.select_for_update().get(pk=approval.pk)
        round_start(approval=locked, args={**locked.args, **args}, by=by)


def test_a_batch_decision_with_one_stale_item_decides_the_others_and_reports_it_409(
    demo_policy, alice, bob, carol, queued, django_capture_on_commit_callbacks
):
    first, stale, third = refunds(alice, "write")
    loaded = seen([first, stale, third])
    new_round(stale, carol, amount=999)  # changed after bob loaded the batch

    with django_capture_on_commit_callbacks(execute=True):
        results = approval_batch_decide(
            user=bob, decision="approve", items=loaded, tier="write", **KEY
        )

    assert [(r.id, r.status, r.outcome) for r in results] == [
        (first.pk, 200, "approved"),
        (stale.pk, 409, "hash_mismatch"),
        (third.pk, 200, "approved"),
    ]
    statuses = dict(ApprovalRequest.objects.values_list("pk", "status"))
    assert statuses == {first.pk: "approved", stale.pk: "pending", third.pk: "approved"}
    assert not ApprovalVote.objects.filter(approval=stale).exists()
    # The run advance is enqueued per decided item, never for the stale one.
    assert tasks_named(queued, ADVANCE) == [
        (ADVANCE, str(first.run_id)),
        (ADVANCE, str(third.run_id)),
    ]


def test_each_item_gets_its_own_decided_event_bound_to_its_own_payload_hash(
    demo_policy, alice, bob
):
    approvals = refunds(alice, "write")

    approval_batch_decide(
        user=bob, decision="reject", items=seen(approvals), message="duplicate", tier="write", **KEY
    )

    for approval in approvals:
        decided = AuditEvent.objects.get(action="approval.decided", approval_id=approval.pk)
        assert decided.data["decision"] == "reject"
        assert event_data_open(decided)["shown"]["payload_hash"] == approval.payload_hash
        voted = AuditEvent.objects.get(action="approval.voted", approval_id=approval.pk)
        assert voted.data["via"] == "batch"
        assert voted.data["payload_hash"] == approval.payload_hash
    hashes = {a.payload_hash for a in approvals}
    assert len(hashes) == 3  # each item its own hash
    assert ApprovalRequest.objects.filter(status="rejected").count() == 3


def test_one_batch_event_records_the_key_the_decision_and_each_items_outcome(
    demo_policy, alice, bob
):
    first, stale = refunds(alice, "write", count=2)
    loaded = seen([first, stale])
    new_round(stale, bob, amount=1)

    approval_batch_decide(user=bob, decision="approve", items=loaded, tier="write", **KEY)

    event = AuditEvent.objects.get(action="approval.batch_decided")
    assert event.actor == f"user:{bob.pk}"
    assert event.data == {
        "batch": "refund_agent/refund_order/write",
        "decision": "approve",
        "items": [first.pk, stale.pk],
        "results": [
            {"id": first.pk, "status": 200, "outcome": "approved"},
            {"id": stale.pk, "status": 409, "outcome": "hash_mismatch"},
        ],
    }
    last = AuditEvent.objects.order_by("-seq").first()
    assert last.pk == event.pk  # recorded after the items


def test_in_a_quorum_of_two_each_item_gets_a_vote_and_none_is_final(
    demo_policy, alice, bob, queued, django_capture_on_commit_callbacks
):
    approvals = refunds(alice, "critical")

    with django_capture_on_commit_callbacks(execute=True):
        results = approval_batch_decide(
            user=bob, decision="approve", items=seen(approvals), tier="critical", **KEY
        )

    assert [(r.status, r.outcome, r.received, r.required) for r in results] == [
        (200, "voted", 1, 2)
    ] * 3
    for approval in approvals:
        approval.refresh_from_db()
        assert approval.status == ApprovalRequest.Status.PENDING
        assert approval.votes.get().user == bob
    assert not AuditEvent.objects.filter(action="approval.decided").exists()
    assert tasks_named(queued, ADVANCE) == []


def test_a_second_batch_by_the_same_person_is_409_already_voted_per_item(demo_policy, alice, bob):
    approvals = refunds(alice, "critical", count=2)
    approval_batch_decide(
        user=bob, decision="approve", items=seen(approvals), tier="critical", **KEY
    )

    again = approval_batch_decide(
        user=bob, decision="approve", items=seen(approvals), tier="critical", **KEY
    )

    assert {(r.status, r.outcome) for r in again} == {(409, "already_voted")}


def test_a_batch_never_crosses_tiers_an_item_of_another_is_400_and_nothing_is_decided(
    demo_policy, alice, carol
):
    writes = refunds(alice, "write", count=2)
    (critical,) = refunds(alice, "critical", count=1)

    with pytest.raises(DecisionInvalid) as refused:
        approval_batch_decide(
            user=carol, decision="approve", items=seen([*writes, critical]), tier="write", **KEY
        )

    assert refused.value.errors == {
        "items[2].id": "not of the batch refund_agent/refund_order/write"
    }
    assert not ApprovalVote.objects.exists()
    assert set(ApprovalRequest.objects.values_list("status", flat=True)) == {"pending"}
    assert not AuditEvent.objects.filter(action="approval.batch_decided").exists()


def test_an_item_of_another_agent_or_tool_is_refused_whole_too(demo_policy, alice, bob):
    (mine,) = refunds(alice, "write", count=1)
    other_agent = request_approval(
        requester=alice, tier="write", run=RunFactory(requested_by=alice, agent="billing")
    )

    with pytest.raises(DecisionInvalid) as refused:
        approval_batch_decide(
            user=bob, decision="approve", items=seen([mine, other_agent]), tier="write", **KEY
        )

    assert list(refused.value.errors) == ["items[1].id"]
    assert not ApprovalVote.objects.exists()


def test_edit_and_respond_are_not_offered_in_a_batch(demo_policy, alice, bob):
    approvals = refunds(alice, "write", count=2)

    for decision in ("edit", "respond"):
        with pytest.raises(DecisionInvalid) as refused:
            approval_batch_decide(
                user=bob, decision=decision, items=seen(approvals), tier="write", **KEY
            )
        assert list(refused.value.errors) == ["decision"]
    assert not ApprovalVote.objects.exists()


def test_the_requester_cannot_batch_decide_their_own_runs_approvals(demo_policy, alice, bob):
    alice.groups.add(demo_policy["approvers-write"])
    approvals = refunds(alice, "write", count=2)

    assert batch_list(user=alice) == []
    results = approval_batch_decide(
        user=alice, decision="approve", items=seen(approvals), tier="write", **KEY
    )

    assert {(r.status, r.outcome) for r in results} == {(403, "forbidden")}
    assert "four eyes" in results[0].detail
    assert not ApprovalVote.objects.exists()


def test_a_reader_without_the_tier_sees_no_batch(demo_policy, alice, bob, carol, dave):
    refunds(alice, "critical", count=2)
    refunds(alice, "write", count=2)

    assert [s.batch.key for s in batch_list(user=carol)] == [
        "refund_agent/refund_order/critical",
        "refund_agent/refund_order/write",
    ]
    assert [s.batch.tier for s in batch_list(user=bob)] == ["critical", "write"]
    demo_policy["approvers-write"].user_set.remove(bob)
    assert batch_list(user=bob) == []
    assert batch_list(user=dave) == []
    assert batch_get(user=dave, tier="write", **KEY).items == []


def test_a_batch_needs_two_items_and_leaves_out_what_the_reader_already_voted_on(
    demo_policy, alice, bob, carol
):
    first, second = refunds(alice, "critical", count=2)
    assert [(s.batch.key, s.count) for s in batch_list(user=bob)] == [
        ("refund_agent/refund_order/critical", 2)
    ]

    decide(first, bob)

    assert batch_list(user=bob) == []  # one item left for bob: not a batch
    assert batch_list(user=carol)[0].count == 2


def test_a_batchs_items_are_oldest_first_each_with_its_diff_against_the_first(
    demo_policy, alice, bob
):
    approvals = refunds(alice, "write")

    batch = batch_get(user=bob, tier="write", **KEY)

    assert [item.approval.pk for item in batch.items] == [a.pk for a in approvals]
    assert batch.items[0].diff == {}
    assert batch.items[2].diff == {
        "amount": {"from": 101, "to": 103},
        "order_id": {"from": "A-1", "to": "A-3"},
    }
    assert batch.items[1].rationale == "The customer was charged twice."


def test_reading_a_batch_takes_the_same_queries_for_3_or_30_items(
    demo_policy, alice, bob, django_assert_max_num_queries
):
    refunds(alice, "write", count=3)
    with django_assert_max_num_queries(8) as small:
        assert len(batch_get(user=bob, tier="write", **KEY).items) == 3
    refunds(alice, "write", count=27)

    with django_assert_max_num_queries(len(small.captured_queries)):
        assert len(batch_get(user=bob, tier="write", **KEY).items) == 30
    with django_assert_max_num_queries(len(small.captured_queries)):
        assert batch_list(user=bob)[0].count == 30


def test_the_queue_asks_whether_a_batch_exists_with_a_bounded_read(demo_policy, alice, bob, dave):
    refunds(alice, "write", count=1)
    refunds(alice, "critical", count=1)
    assert not batch_offered(user=bob)  # one of each: no batch

    refunds(alice, "write", count=1)

    assert batch_offered(user=bob)
    assert not batch_offered(user=bob, probe=2)  # beyond the probe: not offered on the queue
    assert not batch_offered(user=dave)


def test_an_item_whose_policy_changed_while_it_waited_is_428_to_open_alone(
    demo_policy, alice, bob, admin
):
    approvals = refunds(alice, "write", count=2)
    tier = RiskTier.objects.get(name="write")
    tier.ttl_seconds = 600
    tier.save()
    policy_change_record(obj=tier, change="changed", actor=admin)

    results = approval_batch_decide(
        user=bob, decision="approve", items=seen(approvals), tier="write", **KEY
    )

    assert {(r.status, r.outcome) for r in results} == {(428, "changes")}
    assert "Open it alone" in results[0].detail
    assert not ApprovalVote.objects.exists()
