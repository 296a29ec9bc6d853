"""Fixtures for the API tests: clients, a probe agent, runs and approvals as rows."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from typing import Any, Literal

import factory
import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone
from pydantic import BaseModel
from rest_framework.test import APIClient

from agents.runtime.registry import AgentSpec, agent_register, agent_unregister
from approvals.models import AgentRun, ApprovalRequest
from audit.canonical import payload_hash
from tests import audit_purge
from tests.support.queue import tasks_named  # noqa: F401 - the tests import it from here

# The decision race is transactional (each reviewer thread has its own connection), so its
# flush must be allowed to empty the append-only audit table.
audit_purge.install()

PROBE_AGENT = "api_probe"

REFUND_ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}


class ProbeInput(BaseModel):
    """Same shape as the incident copilot's input."""

    service: str
    signal: str
    severity: Literal["sev1", "sev2", "sev3", "sev4"]


def _never_built(**kwargs: Any) -> Any:
    raise AssertionError("the API tests never run a graph")


@pytest.fixture
def probe_agent() -> Iterator[AgentSpec]:
    spec = agent_register(
        AgentSpec(
            name=PROBE_AGENT,
            version="7",
            factory=_never_built,
            description="Triage probe used by the API tests.",
            input_model=ProbeInput,
            example_input={"service": "checkout", "signal": "5xx spike", "severity": "sev2"},
        )
    )
    yield spec
    agent_unregister(PROBE_AGENT)


@pytest.fixture(autouse=True)
def _nothing_runs(queued):
    """Every task these tests enqueue is recorded on ``queued`` (tests.support.queue)."""
    return queued


@pytest.fixture
def api() -> APIClient:
    return APIClient()


def client_for(user: User) -> APIClient:
    client = APIClient()
    client.force_authenticate(user=user)
    return client


def approver(username: str) -> User:
    user = User.objects.create_user(username=username, password="demo")
    user.user_permissions.add(
        Permission.objects.get(content_type__app_label="approvals", codename="decide")
    )
    return user


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = AgentRun

    id = factory.LazyFunction(uuid.uuid4)
    thread_id = factory.LazyAttribute(lambda run: str(run.id))
    agent = PROBE_AGENT
    graph_version = "7"
    status = AgentRun.Status.WAITING
    input = factory.LazyFunction(
        lambda: {"service": "checkout", "signal": "5xx spike", "severity": "sev2"}
    )


class ApprovalFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = ApprovalRequest

    class Params:
        proposed = factory.LazyFunction(lambda: {"order_id": "A-100", "amount": 120})

    run = factory.SubFactory(RunFactory)
    interrupt_id = factory.Sequence(lambda n: f"interrupt-{n}")
    tool = "refund_issue"
    args = factory.LazyAttribute(lambda o: o.proposed)
    payload = factory.LazyAttribute(
        lambda o: {
            "type": "console.approval",
            "tool": o.tool,
            "args": o.args,
            "rationale": "The customer was charged twice.",
            "evidence": ["charge ch_1", "charge ch_2"],
            "args_schema": REFUND_ARGS_SCHEMA,
            "tier": "write",
        }
    )
    payload_hash = factory.LazyAttribute(lambda o: payload_hash(o.payload))
    tier = "write"
    allowed_decisions = factory.LazyFunction(lambda: ["approve", "edit", "reject", "respond"])
    expires_at = factory.LazyFunction(lambda: timezone.now() + dt.timedelta(hours=1))
