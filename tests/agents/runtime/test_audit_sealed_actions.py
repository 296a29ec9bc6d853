"""Every audit event that carries run data seals its personal keys under the run's data key
(plan table 1.2): driven through the real services, the stored row (data and the hashed
canonical text) holds no plaintext, event_data_open gives the values back, and the chain
verifies on its fast path."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from pydantic import BaseModel

from agents.effects import ledger
from agents.effects.compensation import effect_compensate
from agents.effects.errors import CompensationFailed
from agents.effects.ledger import effect_execute
from agents.effects.reconcile import effect_escalate, effect_reconcile
from agents.models import Effect
from agents.runtime import advance, failures
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from agents.services import effect_settle, run_start
from agents.tools import ToolSpec, tool_register, tool_unregister
from approvals import services as approval_services
from approvals.changes import approval_changes, changes_digest
from approvals.models import AgentRun
from approvals.services import policy_seed_demo
from audit import verify
from audit.models import AuditEvent
from audit.private import event_data_open
from core.sealing import MARKER, is_envelope
from tests.support.agents import build_note_graph
from tests.support.approvals import decide, request_approval
from tests.support.factories import RunFactory

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "ada.lovelace@example.com/7f3a"
# A value that must contain the secret, where the exact value is the service's own text.
HAS_SECRET = object()


class EchoArgs(BaseModel):
    text: str


@pytest.fixture
def world(note_agent, alice, bob, carol, monkeypatch):
    """The demo policy (bob approves write, carol critical), and two test tools: one echoing
    its args (undone by the other), scripted to fail by ``world.raises``."""
    policy_seed_demo()
    groups = {g.name: g for g in Group.objects.all()}
    bob.groups.add(groups["approvers-write"])
    carol.groups.add(groups["approvers-write"], groups["approvers-critical"])
    monkeypatch.setattr(ledger, "RETRY_BASE_DELAY_S", 0.001)

    class World:
        raises: BaseException | None = None
        found: dict[str, Any] | None = None

    def echo(args: dict[str, Any], key: str | None) -> dict[str, Any]:
        if World.raises is not None:
            raise World.raises
        return {"echo": args["text"]}

    common = {"description": "t", "args_model": EchoArgs, "tier": "write"}
    tool_register(ToolSpec(name="sealed_undo", run=echo, **common))
    tool_register(
        ToolSpec(
            name="sealed_echo",
            run=echo,
            compensate_with="sealed_undo",
            lookup=lambda key: World.found,
            **common,
        )
    )
    World.alice, World.bob, World.carol = alice, bob, carol
    yield World
    tool_unregister("sealed_echo")
    tool_unregister("sealed_undo")


def _running(world) -> AgentRun:
    return RunFactory(requested_by=world.alice, status=AgentRun.Status.RUNNING)


def _effect(world, *, raises: BaseException | None = None) -> Effect:
    run = _running(world)
    world.raises = raises
    # The failing scripts end in the ledger's raise.
    with contextlib.suppress(Exception):
        effect_execute(
            run_id=run.thread_id, key=f"{run.thread_id}:c1", tool="sealed_echo", args=ARGS
        )
    world.raises = None
    return Effect.objects.get(key=f"{run.thread_id}:c1")


ARGS = {"text": SECRET}
Case = Callable[[Any], dict[str, Any]]


def run_created(world):
    run_start(agent="note_agent", input={"topic": SECRET}, user=world.alice)
    return {"input": {"topic": SECRET}}


def run_completed(world):
    approval_services.run_mark_completed(run=_running(world), output={"summary": SECRET})
    return {"output": {"summary": SECRET}}


def run_failed(world):
    approval_services.run_mark_failed(run=_running(world), error=SECRET, dead=False)
    return {"error": SECRET}


def run_dead(world):
    approval_services.run_mark_failed(run=_running(world), error=SECRET, dead=True)
    return {"error": SECRET}


def run_retrying(world):
    approval_services.run_record_failure(run=_running(world), error=SECRET, retry_in=2.0)
    return {"error": SECRET}


def run_escalated(world):
    run = RunFactory(
        requested_by=world.alice, status=AgentRun.Status.RUNNING, input={"topic": SECRET}
    )
    try:
        raise ValueError(SECRET)
    except ValueError as exc:
        failures.failure_record(run, exc)
    return {"error": f"ValueError: {SECRET}", "input": {"topic": SECRET}, "traceback": HAS_SECRET}


def run_escalated_by_compensation(world, monkeypatch):
    def refuse(*, run_id):
        raise CompensationFailed(f"undo of {SECRET} failed", compensated=[], failed=["k"])

    monkeypatch.setattr(advance, "run_compensate", refuse)
    run = RunFactory(
        requested_by=world.alice, status=AgentRun.Status.CANCELLED, cancel_requested=True
    )
    advance._compensate_cancelled(run)
    return {"error": f"compensation failed: undo of {SECRET} failed"}


def run_migrated(world):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=world.alice)
    advance.run_advance(run_id=run.id)
    agent_register(
        AgentSpec(
            name="note_agent",
            version="2",
            factory=build_note_graph,
            policy="migrate",
            migrate=lambda values, from_version: {"log": [SECRET]},
        )
    )
    agent_unregister("note_agent", "1")
    approval = run.approvals.get()
    # The new version is a change the reviewer confirms (approvals/changes.py).
    decide(approval, world.bob, changes_seen=changes_digest(approval_changes(approval)))
    advance.run_advance(run_id=run.id)
    return {"update": {"log": [SECRET]}}


def approval_requested(world):
    approval = request_approval(
        requester=world.alice, tier="write", args={"order_id": SECRET, "amount": 120}
    )
    return {"payload": approval.payload}


def _edited(world):
    approval = request_approval(
        requester=world.alice, tier="write", args={"order_id": SECRET, "amount": 120}
    )
    edited = {"order_id": SECRET, "amount": 60}
    decide(approval, world.bob, decision="edit", args=edited, message=SECRET, note=SECRET)
    return approval, edited


def approval_voted(world):
    _, edited = _edited(world)
    return {"args": edited, "message": SECRET, "note": SECRET}


def approval_decided(world):
    approval, edited = _edited(world)
    proposed = {"order_id": SECRET, "amount": 120}
    return {
        "shown": {"payload": approval.payload, "payload_hash": approval.payload_hash},
        "proposed_args": proposed,
        "final_args": edited,
        "diff": {"amount": {"from": 120, "to": 60}},
        "message": SECRET,
        "note": SECRET,
    }


def approval_tier_raised(world):
    approval = request_approval(
        requester=world.alice, tier="write", args={"order_id": "A-1", "amount": 120}
    )
    raised = {"order_id": SECRET, "amount": 900}
    decide(approval, world.carol, decision="edit", args=raised)
    return {"args": raised}


def effect_claimed(world):
    _effect(world)
    return {"args": ARGS}


def effect_succeeded(world):
    _effect(world)
    return {"args": ARGS, "result": {"echo": SECRET}}


def effect_failed(world):
    _effect(world, raises=ValueError(SECRET))
    return {"args": ARGS, "error": f"ValueError: {SECRET}"}


def effect_in_doubt(world):
    _effect(world, raises=ConnectionResetError(SECRET))  # cut off: it may have acted
    return {"args": ARGS, "error": SECRET}


def effect_escalated(world):
    effect_escalate(_effect(world, raises=TimeoutError("no answer")), reason="a person says")
    return {"args": ARGS}


def effect_reconciled(world):
    effect = _effect(world, raises=TimeoutError("no answer"))
    world.found = {"echo": SECRET}
    assert effect_reconcile(effect) == "succeeded"
    return {"result": {"echo": SECRET}}


def effect_compensated(world):
    effect_compensate(effect=_effect(world))
    return {"args": ARGS, "result": {"echo": SECRET}}


def effect_settled(world):
    effect = _effect(world, raises=TimeoutError("no answer"))
    effect_escalate(effect, reason="a person says")
    effect_settle(
        effect=Effect.objects.get(pk=effect.pk), outcome="done", user=world.bob, note=SECRET
    )
    return {"note": SECRET}


# (action, how the real services write it): every action of plan table 1.2, plus the note a
# person writes when settling an effect.
CASES: list[tuple[str, Case]] = [
    ("run.created", run_created),
    ("run.completed", run_completed),
    ("run.failed", run_failed),
    ("run.dead", run_dead),
    ("run.retrying", run_retrying),
    ("run.escalated", run_escalated),
    ("run.escalated", run_escalated_by_compensation),
    ("run.migrated", run_migrated),
    ("approval.requested", approval_requested),
    ("approval.voted", approval_voted),
    ("approval.decided", approval_decided),
    ("approval.tier_raised", approval_tier_raised),
    ("effect.claimed", effect_claimed),
    ("effect.succeeded", effect_succeeded),
    ("effect.failed", effect_failed),
    ("effect.in_doubt", effect_in_doubt),
    ("effect.escalated", effect_escalated),
    ("effect.reconciled", effect_reconciled),
    ("effect.compensated", effect_compensated),
    ("effect.settled", effect_settled),
]


def _stored(seq: int) -> str:
    """The row's data and canonical columns as the database holds them."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT data, canonical FROM {AuditEvent._meta.db_table} WHERE seq = %s", [seq]
        )
        data, canonical = cursor.fetchone()
    return f"{data if isinstance(data, str) else json.dumps(data)}\n{canonical}"


@pytest.mark.parametrize(("action", "case"), CASES, ids=[f"{a}-{c.__name__}" for a, c in CASES])
def test_each_action_of_the_table_seals_its_keys(world, monkeypatch, action, case):
    arguments = (world, monkeypatch) if case is run_escalated_by_compensation else (world,)
    expected = case(*arguments)

    (event,) = [
        e
        for e in AuditEvent.objects.filter(action=action).order_by("seq")
        if set(expected) <= set(e.data)
    ]
    assert SECRET not in _stored(event.seq)
    for key in expected:
        assert is_envelope(event.data[key]), key
        assert type(event.data[key]) is dict and list(event.data[key]) == [MARKER]
    opened = event_data_open(event)
    for key, value in expected.items():
        if value is HAS_SECRET:
            assert SECRET in json.dumps(opened[key]), key
        else:
            assert opened[key] == value, key
    # Everything else of the record stays plaintext (policy, metrics and filters read it).
    assert {k: v for k, v in opened.items() if k not in expected} == {
        k: v for k, v in event.data.items() if k not in expected
    }
    fell_back = []
    real = verify._row_problem
    monkeypatch.setattr(
        verify, "_row_problem", lambda values, **kw: fell_back.append(values) or real(values, **kw)
    )
    result = verify.chain_verify_db()
    assert result.ok, result.reason
    assert fell_back == []  # every row shown good on verify's fast path
