"""Graphs written for Agent Inbox (``interrupt([HumanInterrupt])[0]``) work in the console: one
approval per request, its config as the allowed decisions, the tier from the console's policy,
and each decision answered with the ``HumanResponse`` Agent Inbox itself would send."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group

from agents.hitl import protocol
from agents.runtime import advance
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import run_start
from approvals.models import AgentRun, ApprovalRequest, RiskTier, ToolPolicy, ToolPolicyRule
from approvals.services import DecisionInvalid, approval_decide, policy_seed_demo
from tests.support.agents import INBOX_CONFIG, INBOX_RESUMES, REFUNDS, inbox_factory

pytestmark = pytest.mark.django_db(transaction=True)

ASKED = {"order_id": "A-7", "amount": 40}


@pytest.fixture
def refund_policy(db, bob, carol) -> dict[str, Group]:
    """The demo tiers, and a tool policy for issue_refund: write, critical above 500."""
    policy_seed_demo()
    groups = {g.name: g for g in Group.objects.all()}
    bob.groups.add(groups["approvers-write"])
    carol.groups.add(groups["approvers-write"], groups["approvers-critical"])
    tool_policy = ToolPolicy.objects.create(tool="issue_refund", tier_id=_tier("write"))
    ToolPolicyRule.objects.create(
        policy=tool_policy,
        position=0,
        arg="amount",
        op="gt",
        value="500",
        tier_id=_tier("critical"),
    )
    return groups


def _tier(name: str) -> int:
    from approvals.models import RiskTier

    return RiskTier.objects.get(name=name).pk


@pytest.fixture
def inbox_agent() -> Iterator[Any]:
    """``inbox_agent(as_list=True, config=None)`` registers an Agent Inbox graph; its name."""
    names: list[str] = []
    INBOX_RESUMES.clear()
    REFUNDS.clear()

    def register(*, as_list: bool = True, config: dict[str, bool] | None = None) -> str:
        name = f"inbox_{len(names)}"
        factory = inbox_factory(as_list=as_list, config=config)
        agent_register(AgentSpec(name=name, version="1", factory=factory))
        names.append(name)
        return name

    yield register
    for name in names:
        agent_unregister(name)
    INBOX_RESUMES.clear()
    REFUNDS.clear()


def start(agent: str, user, **args: Any) -> tuple[AgentRun, ApprovalRequest]:
    run = run_start(agent=agent, input={**ASKED, **args}, user=user)
    assert advance.run_advance(run_id=run.id) == "waiting"
    (approval,) = run.approvals.all()
    return run, approval


def decide(approval: ApprovalRequest, user, decision: str, **kw: Any) -> None:
    approval.refresh_from_db()
    approval_decide(
        approval=approval, user=user, decision=decision, seen_hash=approval.payload_hash, **kw
    )


def test_a_human_interrupt_becomes_one_approval_read_as_agent_inbox(
    inbox_agent, refund_policy, alice
):
    config = {**INBOX_CONFIG, "allow_respond": False}
    run, approval = start(inbox_agent(config=config), alice)
    assert approval.tool == "issue_refund"
    assert approval.args == ASKED
    assert approval.tier == "write"
    # The config says what the graph can take: accept, edit and ignore, but no response.
    assert approval.allowed_decisions == ["approve", "edit", "reject"]
    assert approval.payload["protocol"] == "agent_inbox"
    assert approval.payload["mode"] == "list"
    assert approval.payload["rationale"].startswith("**Refund** order A-7")
    assert "ignore" in approval.payload["on_deny"]


def test_the_tier_comes_from_the_consoles_policy(inbox_agent, refund_policy, alice, carol):
    run, approval = start(inbox_agent(), alice, amount=900)
    assert approval.tier == "critical"
    # Critical needs two approvers: one vote does not resume the graph.
    decide(approval, carol, "approve")
    approval.refresh_from_db()
    assert approval.status == ApprovalRequest.Status.PENDING
    assert advance.run_advance(run_id=run.id) == "waiting"
    assert REFUNDS == []


def test_a_decision_the_config_does_not_allow_is_refused(inbox_agent, refund_policy, alice, bob):
    _, approval = start(inbox_agent(config={**INBOX_CONFIG, "allow_respond": False}), alice)
    with pytest.raises(DecisionInvalid):
        decide(approval, bob, "respond", message="do it by hand")


@pytest.mark.parametrize(
    ("decision", "kw", "response", "refunds"),
    [
        (
            "approve",
            {},
            {"type": "accept", "args": {"action": "issue_refund", "args": ASKED}},
            [ASKED],
        ),
        (
            "edit",
            {"args": {"order_id": "A-7", "amount": 25}},
            {
                "type": "edit",
                "args": {"action": "issue_refund", "args": {"order_id": "A-7", "amount": 25}},
            },
            [{"order_id": "A-7", "amount": 25}],
        ),
        (
            "respond",
            {"message": "Refund it as store credit instead."},
            {"type": "response", "args": "Refund it as store credit instead."},
            [],
        ),
        ("reject", {"message": "Parcel was delivered."}, {"type": "ignore", "args": None}, []),
    ],
)
def test_each_decision_reaches_the_graph_as_its_human_response(
    inbox_agent, refund_policy, alice, bob, decision, kw, response, refunds
):
    run, approval = start(inbox_agent(), alice)
    decide(approval, bob, decision, **kw)
    assert advance.run_advance(run_id=run.id) == "completed"
    # Asked with a list of one, answered with a list of one.
    assert [[response]] == INBOX_RESUMES
    assert refunds == REFUNDS
    run.refresh_from_db()
    assert run.output["response"] == response


def test_a_request_sent_alone_is_answered_alone(inbox_agent, refund_policy, alice, bob):
    run, approval = start(inbox_agent(as_list=False), alice)
    assert approval.payload["mode"] == "single"
    decide(approval, bob, "approve")
    assert advance.run_advance(run_id=run.id) == "completed"
    assert INBOX_RESUMES == [{"type": "accept", "args": {"action": "issue_refund", "args": ASKED}}]
    assert REFUNDS == [ASKED]


def test_accept_carries_no_args_when_the_config_allows_no_edit(
    inbox_agent, refund_policy, alice, bob
):
    config = {**INBOX_CONFIG, "allow_edit": False}
    run, approval = start(inbox_agent(config=config), alice)
    assert approval.allowed_decisions == ["approve", "reject", "respond"]
    decide(approval, bob, "approve")
    assert advance.run_advance(run_id=run.id) == "completed"
    assert INBOX_RESUMES == [[{"type": "accept", "args": None}]]
    assert REFUNDS == [ASKED]


# --- recognising the schema ------------------------------------------------------------------

REQUEST = {
    "action_request": {"action": "issue_refund", "args": ASKED},
    "config": INBOX_CONFIG,
    "description": None,
}


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (REQUEST, "agent_inbox"),
        ([REQUEST], "agent_inbox"),
        ([REQUEST, REQUEST], "other"),
        ({"action_request": {"action": "x"}}, "other"),
        ({**REQUEST, "action_request": {"action": "x", "args": "not a dict"}}, "other"),
        ({"action_requests": [{"name": "x", "args": {}}], "review_configs": []}, "langchain.hitl"),
        ({"type": "console.approval", "tool": "x"}, "console"),
    ],
)
def test_the_protocol_of_a_value_is_named(value, name):
    assert protocol.protocol_name(value) == name


def test_the_tier_wins_when_it_forbids_every_decision_the_config_allows(db):
    policy_seed_demo()
    RiskTier.objects.filter(name="write").update(allowed_decisions=["approve", "reject"])
    config = {**dict.fromkeys(INBOX_CONFIG, False), "allow_edit": True}
    (inbox,) = protocol.approval_items(interrupt_id="i-1", value={**REQUEST, "config": config})
    hitl = {
        "action_requests": [{"name": "x", "args": {}}],
        "review_configs": [{"action_name": "x", "allowed_decisions": ["edit"]}],
    }
    (batched,) = protocol.approval_items(interrupt_id="i-2", value=hitl)
    # Policy over the agent's wish: never an edit the tier forbids (an agent that cannot take
    # approve or reject fails closed on it).
    assert inbox["tier"] == batched["tier"] == "write"
    assert inbox["allowed_decisions"] == batched["allowed_decisions"] == ["approve", "reject"]


def test_a_config_that_allows_nothing_still_lets_the_reviewer_ignore(db):
    value = {**REQUEST, "config": dict.fromkeys(INBOX_CONFIG, False)}
    (item,) = protocol.approval_items(interrupt_id="i-1", value=value)
    assert item["allowed_decisions"] == ["reject"]
    assert protocol.resume_value(value=value, decisions=[{"decision": "reject"}]) == {
        "type": "ignore",
        "args": None,
    }
