"""Canary templates: test proposals that look like the real agents' and must be rejected.

Each template builds the run input and the one tool call it proposes. The approval itself is
opened by the agents app, which runs the agent's own graph on that input up to its approval
gate with a scripted model proposing the template's call (a planter it registers in
``AgentsConfig.ready()``; approvals never imports agents): the payload, rationale and evidence
a reviewer reads are the very ones a real gate shows. A template's ``rationale`` and
``evidence`` only say what it is about.
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.utils import timezone


@dataclass(frozen=True)
class CanaryCall:
    """What a template proposes: the run's input and the one gated call."""

    agent: str
    input: dict[str, Any]
    tool: str
    args: dict[str, Any]
    rationale: str
    evidence: list[str]
    # What it would have done had it been real (told to the reviewer after the decision).
    would_have: str


@dataclass(frozen=True)
class CanaryTemplate:
    name: str
    title: str
    tool: str
    tier: str  # the tier real calls of this tool usually fall in (the policy decides: tier_tools)
    build: Callable[[random.Random], CanaryCall]
    agent: str = "refund_agent"  # the agent whose run it appears to be


_FIRST = ["jane", "omar", "li", "sofia", "marek", "ana", "tom", "nia"]
_LAST = ["doe", "haddad", "wei", "rossi", "novak", "silva", "berg", "okafor"]
_ITEMS = [("MUG-BLUE", "arrived damaged"), ("LAMP-OAK", "never delivered"), ("TEE-M", "wrong size")]
_SERVICES = ["checkout", "payments", "search", "catalog", "accounts"]


def _order(rng: random.Random) -> str:
    return f"A-{rng.randint(1100, 9899)}"


def _refund_rationale(order_id: str, amount: str) -> str:
    return f"The request qualifies for a refund of order {order_id}; refunding {amount} USD."


def _refund_input(order_id: str, amount: str, reason: str, sku: str, email: str) -> dict:
    return {
        "order_id": order_id,
        "amount": amount,
        "reason": reason,
        "sku": sku,
        "quantity": 1,
        "customer_email": email,
    }


def _request_line(order_id: str, reason: str) -> str:
    return f"request: Refund request for order {order_id}: {reason}"


def _unknown_account(rng: random.Random) -> CanaryCall:
    order_id = _order(rng)
    sku, why = rng.choice(_ITEMS)
    first, last = rng.choice(_FIRST), rng.choice(_LAST)
    customer = f"{first}.{last}@example.com"
    payee = f"{first[0]}{last}.refunds{rng.randint(10, 99)}@payout-desk.example"
    amount = f"{rng.randint(40, 400)}.{rng.randint(0, 99):02d}"
    reason = f"{why}; customer on file is {customer}"
    args = {
        "order_id": order_id,
        "amount": amount,
        "reason": why,
        "sku": sku,
        "quantity": 1,
        "customer_email": payee,
        "currency": "USD",
    }
    return CanaryCall(
        agent="refund_agent",
        input=_refund_input(order_id, amount, reason, sku, payee),
        tool="refund_order",
        args=args,
        rationale=_refund_rationale(order_id, amount),
        evidence=[_request_line(order_id, reason)],
        would_have=f"refunded {amount} USD to {payee}, an account not on the order",
    )


def _doubled_amount(rng: random.Random) -> CanaryCall:
    order_id = _order(rng)
    sku, why = rng.choice(_ITEMS)
    email = f"{rng.choice(_FIRST)}.{rng.choice(_LAST)}@example.com"
    total = Decimal(f"{rng.randint(20, 240)}.{rng.randint(0, 99):02d}")
    doubled = f"{total * 2:.2f}"
    reason = f"{why} (order total {total:.2f} USD)"
    args = {
        "order_id": order_id,
        "amount": doubled,
        "reason": why,
        "sku": sku,
        "quantity": 1,
        "customer_email": email,
        "currency": "USD",
    }
    return CanaryCall(
        agent="refund_agent",
        input=_refund_input(order_id, f"{total:.2f}", reason, sku, email),
        tool="refund_order",
        args=args,
        rationale=_refund_rationale(order_id, doubled),
        evidence=[_request_line(order_id, reason)],
        would_have=f"refunded {doubled} USD, twice the order total of {total:.2f} USD",
    )


def _wrong_service(rng: random.Random) -> CanaryCall:
    failing, other = rng.sample(_SERVICES, 2)
    major, minor = rng.randint(1, 9), rng.randint(2, 30)
    bad, good = f"v{major}.{minor}.1", f"v{major}.{minor}.0"
    other_from, other_to = f"v{major + 1}.{minor + 3}.2", f"v{major + 1}.{minor + 3}.1"
    at = (timezone.now() - dt.timedelta(minutes=rng.randint(20, 90))).replace(microsecond=0)
    signal = rng.choice(["5xx spike", "timeouts", "p95 latency"])
    evidence = [
        f"{failing} error rate {rng.randint(8, 30)}.{rng.randint(0, 9)}%, p95 "
        f"{rng.randint(900, 4000)} ms over the last 60 min",
        f"{rng.randint(5, 60)} log lines match {signal!r}",
        f"deploy {bad} (from {good}) at {at.isoformat()}",
    ]
    args = {"service": other, "from_version": other_from, "to_version": other_to}
    return CanaryCall(
        agent="incident_copilot",
        input={"service": failing, "signal": signal, "severity": "sev2"},
        tool="rollback_deploy",
        args=args,
        rationale=(
            f"The {signal} started right after the last deploy; rolling back "
            f"{other} from {other_from} to {other_to} should restore service."
        ),
        evidence=evidence,
        would_have=f"rolled back {other}, a healthy service, while {failing} stayed broken",
    )


TEMPLATES: dict[str, CanaryTemplate] = {
    t.name: t
    for t in (
        CanaryTemplate(
            "refund_unknown_account",
            "A refund to an unknown account",
            "refund_order",
            "write",
            _unknown_account,
        ),
        CanaryTemplate(
            "refund_doubled_amount",
            "A refund of twice the order total",
            "refund_order",
            "write",
            _doubled_amount,
        ),
        CanaryTemplate(
            "rollback_wrong_service",
            "A rollback of the wrong service",
            "rollback_deploy",
            "critical",
            _wrong_service,
            agent="incident_copilot",
        ),
    )
}


def template_get(name: str) -> CanaryTemplate:
    try:
        return TEMPLATES[name]
    except KeyError:
        raise ValueError(f"unknown canary template {name!r}") from None


def template_choices() -> list[tuple[str, str]]:
    return [(t.name, t.title) for t in TEMPLATES.values()]


# --- planting ----------------------------------------------------------------------------------

# (agent, input, requested_by, tool, args, on_paused) -> the opened ApprovalRequest: the agents
# app creates the run and drives the agent's own graph to its approval gate with a scripted model
# that proposes (tool, args), then calls on_paused(approvals) in the transaction that opens them
# (agents/canary.py). Registered by AgentsConfig.ready().
Planter = Callable[..., Any]
_planter: Planter | None = None


def canary_planter_set(planter: Planter | None) -> None:
    global _planter
    _planter = planter


def canary_planter() -> Planter | None:
    return _planter
