"""factory_boy factories for the rows the tests build: people, runs, approvals, effects.

The defaults describe a refund waiting for a person: ``ApprovalFactory()`` is a pending "write"
approval of ``refund_order`` on a waiting refund_agent run, with the console's payload shape and
its hash. Pass any model field to override it; the ``Params`` of each factory shape the rest:

- ``created_at=...`` (runs and approvals) back-dates the row after the insert (the field is
  ``auto_now_add``, so the insert always stamps "now").
- ``ApprovalFactory(decided_after=timedelta)`` sets ``decided_at = created_at + decided_after``;
  ``escalated=True`` / ``reminded=True`` set ``escalated_at`` / ``reminded_at`` a second after
  ``created_at``; ``expires_in`` (default 2 hours) sets ``expires_at`` from ``created_at``.
- ``rationale``, ``evidence``, ``args_schema`` and ``extra_payload`` go into the payload; an
  explicit ``payload=`` replaces it whole (``payload_hash`` still follows it unless given).
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import uuid
from typing import Any

import factory
from django.contrib.auth.hashers import make_password
from django.contrib.auth.models import User
from django.utils import timezone

from agents.models import Effect
from approvals.models import AgentRun, ApprovalRequest
from audit.canonical import canonical_hash, payload_hash

DEMO_PASSWORD = "demo"
SECOND = dt.timedelta(seconds=1)

REFUND_ARGS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string", "maxLength": 40},
        "amount": {"type": "number", "exclusiveMinimum": 0, "maximum": 500},
    },
    "required": ["order_id", "amount"],
    "additionalProperties": False,
}
ALL_DECISIONS = ("approve", "edit", "reject", "respond")


@functools.cache
def _demo_password_hash() -> str:
    return make_password(DEMO_PASSWORD)


class UserFactory(factory.django.DjangoModelFactory):
    """A person with the demo password and an example.com address (no groups, no rights)."""

    class Meta:
        model = User

    username = factory.Sequence(lambda n: f"person-{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    # One PBKDF2 hash of the demo password for every person (Django's default hasher takes
    # about half a second per hash, and most tests create four people): a valid hash, checked by
    # every login as any other.
    password = factory.LazyFunction(lambda: _demo_password_hash())


class _Backdated(factory.django.DjangoModelFactory):
    """Takes ``created_at`` (an ``auto_now_add`` field) and writes it after the insert."""

    class Meta:
        abstract = True

    created_at = None

    @classmethod
    def _create(cls, model_class: type, *args: Any, **kwargs: Any) -> Any:
        created_at = kwargs.pop("created_at", None)
        row = super()._create(model_class, *args, **kwargs)
        if created_at is not None:
            model_class.objects.filter(pk=row.pk).update(created_at=created_at)
            row.created_at = created_at
        return row


def _created(row: Any) -> dt.datetime:
    """The moment the row is created at: ``created_at`` if given, else now."""
    return row.created_at or timezone.now()


class RunFactory(_Backdated):
    """A waiting refund_agent run (graph version "1") whose thread id is its id."""

    class Meta:
        model = AgentRun

    id = factory.LazyFunction(uuid.uuid4)
    thread_id = factory.LazyAttribute(lambda run: str(run.id))
    agent = "refund_agent"
    graph_version = "1"
    status = AgentRun.Status.WAITING
    requested_by = factory.SubFactory(UserFactory)
    input = factory.LazyFunction(dict)


def console_payload(row: Any) -> dict[str, Any]:
    """The payload the console's gate stores for an approval (``type: console.approval``)."""
    return {
        "type": "console.approval",
        "tool": row.tool,
        "args": row.args,
        "rationale": row.rationale,
        "evidence": row.evidence,
        "args_schema": row.args_schema,
        "tier": row.tier,
        "allowed_decisions": row.allowed_decisions,
        **row.extra_payload,
    }


class ApprovalFactory(_Backdated):
    """A pending "write" approval of ``refund_order`` with the console's payload."""

    class Meta:
        model = ApprovalRequest

    class Params:
        rationale = "The customer was charged twice."
        evidence = factory.LazyFunction(lambda: ["charge ch_1", "charge ch_2"])
        args_schema = factory.LazyFunction(lambda: copy.deepcopy(REFUND_ARGS_SCHEMA))
        extra_payload = factory.LazyFunction(dict)
        expires_in = dt.timedelta(hours=2)
        decided_after = None
        escalated = factory.Trait(
            escalated_at=factory.LazyAttribute(lambda o: _created(o) + SECOND)
        )
        reminded = factory.Trait(reminded_at=factory.LazyAttribute(lambda o: _created(o) + SECOND))

    run = factory.SubFactory(RunFactory)
    interrupt_id = factory.Sequence(lambda n: f"interrupt-{n}")
    tool = "refund_order"
    args = factory.LazyFunction(lambda: {"order_id": "A-1001", "amount": 120})
    tier = "write"
    allowed_decisions = factory.LazyFunction(lambda: list(ALL_DECISIONS))
    payload = factory.LazyAttribute(console_payload)
    payload_hash = factory.LazyAttribute(lambda o: canonical_hash(o.payload))
    expires_at = factory.LazyAttribute(lambda o: _created(o) + o.expires_in)
    status = ApprovalRequest.Status.PENDING
    decided_by = None
    decided_by_label = factory.LazyAttribute(
        lambda o: o.decided_by.get_username() if o.decided_by is not None else ""
    )
    decided_at = factory.LazyAttribute(
        lambda o: _created(o) + o.decided_after if o.decided_after is not None else None
    )


class EffectFactory(factory.django.DjangoModelFactory):
    """A claimed ledger entry keyed ``<thread id>:<suffix>``, fingerprinted from its args."""

    class Meta:
        model = Effect

    class Params:
        suffix = factory.Sequence(lambda n: f"call-{n}")

    run = factory.SubFactory(RunFactory)
    key = factory.LazyAttribute(lambda o: f"{o.run.thread_id}:{o.suffix}")
    tool = "refund_payment"
    args = factory.LazyFunction(lambda: {"amount": 1})
    args_fingerprint = factory.LazyAttribute(lambda o: payload_hash(o.args))
    status = Effect.Status.CLAIMED
