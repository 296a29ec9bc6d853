"""The refund the console's page tests look at: a ``refund_payment`` with a rich args schema.

``PageApprovalFactory()`` is the shared ``ApprovalFactory`` with the pages' defaults: the
``refund_payment`` args of ``REFUND_ARGS``, an args schema (``REFUND_SCHEMA``) that gives the
edit form a text, a number, a choice, a checkbox and an optional field, the agent's reasons, and
the extra keys the gate adds (``blast_radius`` follows the args). ``PageRunFactory()`` is alice's
kind of refund run: waiting, ``refund_agent``, input ``{"order_id": "A-1001"}``.

A payload the console does not recognise needs its decisions spelled out:
``PageApprovalFactory(payload={...}, allowed_decisions=["respond"])``.
"""

from __future__ import annotations

import copy
from typing import Any

import factory

from tests.support.factories import ALL_DECISIONS, ApprovalFactory, RunFactory

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
RATIONALE = "The parcel arrived broken; the customer sent photos."
EVIDENCE: list[Any] = ["order A-1001 delivered 2 days late", {"photo": "damage.jpg"}]
RUN_URL = "http://testserver/runs/x/"


def blast_radius(args: dict[str, Any]) -> str:
    return f"Refunds {args.get('amount')} USD on order {args.get('order_id')}"


def refund_payload(args: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    """The console payload of a ``refund_payment`` of ``args``, with ``overrides`` on top."""
    args = dict(REFUND_ARGS if args is None else args)
    payload = {
        "type": "console.approval",
        "tool": "refund_payment",
        "args": args,
        "rationale": RATIONALE,
        "evidence": copy.deepcopy(EVIDENCE),
        "blast_radius": blast_radius(args),
        "args_schema": copy.deepcopy(REFUND_SCHEMA),
        "tier": "write",
        "allowed_decisions": list(ALL_DECISIONS),
        "run_url": RUN_URL,
        "expires_at": "",
    }
    payload.update(overrides)
    return payload


class PageRunFactory(RunFactory):
    """A waiting refund_agent run for order A-1001."""

    input = factory.LazyFunction(lambda: {"order_id": "A-1001"})


class PageApprovalFactory(ApprovalFactory):
    """A pending "write" approval of ``refund_payment`` as the console's gate stores it."""

    class Params:
        rationale = RATIONALE
        evidence = factory.LazyFunction(lambda: copy.deepcopy(EVIDENCE))
        args_schema = factory.LazyFunction(lambda: copy.deepcopy(REFUND_SCHEMA))
        extra_payload = factory.LazyAttribute(
            lambda o: {"blast_radius": blast_radius(o.args), "run_url": RUN_URL, "expires_at": ""}
        )

    run = factory.SubFactory(PageRunFactory)
    tool = "refund_payment"
    args = factory.LazyFunction(lambda: dict(REFUND_ARGS))
