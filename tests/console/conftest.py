"""Fixtures for the console pages: runs and approvals as rows, a probe agent, a quiet task queue."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable, Iterator
from typing import Any, Literal

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.utils import timezone
from pydantic import BaseModel

from agents.models import Effect
from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from approvals.models import AgentRun, ApprovalRequest
from audit.canonical import payload_hash
from tests.support.queue import tasks_named  # noqa: F401 - the tests import it from here

PROBE_AGENT = "console_probe"

REFUND_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "title": "Order Id", "maxLength": 40},
        "amount": {"type": "number", "title": "Amount", "exclusiveMinimum": 0, "maximum": 500},
        "reason": {"type": "string", "title": "Reason", "enum": ["damaged", "late", "other"]},
        "notify": {"type": "boolean", "title": "Notify", "default": True},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None, "title": "Note"},
    },
    "required": ["order_id", "amount", "reason"],
    "additionalProperties": False,
}
REFUND_ARGS: dict[str, Any] = {
    "order_id": "A-1001",
    "amount": 120,
    "reason": "damaged",
    "notify": True,
}


class ProbeInput(BaseModel):
    service: str
    severity: Literal["sev1", "sev2", "sev3"]


def _never_built(**kwargs: Any) -> Any:
    raise AssertionError("the console page tests never build a graph")


@pytest.fixture
def probe_agent() -> Iterator[AgentSpec]:
    spec = agent_register(
        AgentSpec(
            name=PROBE_AGENT,
            version="3",
            factory=_never_built,
            description="Probe agent of the console tests.",
            input_model=ProbeInput,
            example_input={"service": "checkout", "severity": "sev2"},
        )
    )
    yield spec
    agent_unregister(PROBE_AGENT)


@pytest.fixture(autouse=True)
def _nothing_runs(queued):
    """Every task these tests enqueue is recorded on ``queued`` (tests.support.queue)."""
    return queued


_counter = itertools.count(1)


def refund_payload(args: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    args = dict(REFUND_ARGS if args is None else args)
    payload = {
        "type": "console.approval",
        "tool": "refund_payment",
        "args": args,
        "rationale": "The parcel arrived broken; the customer sent photos.",
        "evidence": ["order A-1001 delivered 2 days late", {"photo": "damage.jpg"}],
        "blast_radius": f"Refunds {args.get('amount')} USD on order {args.get('order_id')}",
        "args_schema": REFUND_SCHEMA,
        "tier": "write",
        "allowed_decisions": ["approve", "edit", "reject", "respond"],
        "run_url": "http://testserver/runs/x/",
        "expires_at": "",
    }
    payload.update(overrides)
    return payload


@pytest.fixture
def make_run(db) -> Callable[..., AgentRun]:
    def make(
        *, requested_by: User, agent: str = "refund_agent", status: str = "waiting", **fields: Any
    ) -> AgentRun:
        run = AgentRun(
            agent=agent,
            graph_version="1",
            status=status,
            requested_by=requested_by,
            input={"order_id": "A-1001"},
            **fields,
        )
        run.thread_id = str(run.id)
        run.save(force_insert=True)
        return run

    return make


@pytest.fixture
def make_approval(db) -> Callable[..., ApprovalRequest]:
    def make(
        *,
        run: AgentRun,
        tool: str = "refund_payment",
        args: dict[str, Any] | None = None,
        payload: dict[str, Any] | None = None,
        tier: str = "write",
        expires_in: dt.timedelta = dt.timedelta(hours=2),
        allowed: list[str] | None = None,
        status: str = ApprovalRequest.Status.PENDING,
    ) -> ApprovalRequest:
        args = dict(REFUND_ARGS if args is None else args)
        payload = payload if payload is not None else refund_payload(args, tool=tool, tier=tier)
        if allowed is not None and payload.get("type") == "console.approval":
            payload["allowed_decisions"] = allowed
        return ApprovalRequest.objects.create(
            run=run,
            interrupt_id=f"interrupt-{next(_counter)}",
            tool=tool,
            args=args,
            payload=payload,
            payload_hash=payload_hash(payload),
            tier=tier,
            allowed_decisions=allowed or payload.get("allowed_decisions") or ["respond"],
            expires_at=timezone.now() + expires_in,
            status=status,
        )

    return make


@pytest.fixture
def run_of_alice(make_run, alice) -> AgentRun:
    return make_run(requested_by=alice)


@pytest.fixture
def approval(make_approval, run_of_alice) -> ApprovalRequest:
    return make_approval(run=run_of_alice)


def client_for(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def as_bob(bob) -> Client:
    return client_for(bob)


@pytest.fixture
def as_carol(carol) -> Client:
    return client_for(carol)


@pytest.fixture
def as_alice(alice) -> Client:
    return client_for(alice)


@pytest.fixture
def as_dave(dave) -> Client:
    return client_for(dave)


@pytest.fixture
def time_traveller(db) -> User:
    """A reviewer who also holds agents.time_travel."""
    content_type = ContentType.objects.get_for_model(Effect)
    permission, _ = Permission.objects.get_or_create(
        codename="time_travel",
        content_type=content_type,
        defaults={"name": "Can view past states of a run and fork from them"},
    )
    user = User.objects.create_user(username="tina", password="demo")
    user.user_permissions.add(
        permission, Permission.objects.get(codename="decide", content_type__app_label="approvals")
    )
    return user


def make_effect(
    *, run: AgentRun, tool: str = "refund_payment", suffix: str = "call-1", **fields: Any
) -> Effect:
    return Effect.objects.create(
        key=f"{run.thread_id}:{suffix}",
        run=run,
        tool=tool,
        args={"amount": 1},
        args_fingerprint="f" * 64,
        **fields,
    )
