"""The sandbox's demo tools (registered on import; ``AgentsConfig.ready`` imports this module).

Read tools query the sandboxes directly; every other tool is called only through the effects
ledger (``agents.effects.ledger``), which hands it the idempotency key. The refund saga that
strings the refund tools together lives with its agent (``agents.graphs.refund_agent.saga``).

``notify_channel`` posts to the internal incident channel of the sandbox notifier. It is in
tier ``read``: it tells people what already happened, so the incident flow needs no person to
finish; the gate still sees it, so a policy rule can raise its tier.
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, Field

from agents.effects.errors import ToolError
from agents.sandbox import systems as sandbox
from agents.tools import ToolSpec, tool_register

Severity = Literal["sev1", "sev2", "sev3", "sev4"]
SERVICE_PATTERN = r"^[a-z0-9][a-z0-9_-]{0,99}$"


# --- read tools ------------------------------------------------------------------------------


class FetchMetricsArgs(BaseModel):
    service: str = Field(pattern=SERVICE_PATTERN)
    window_minutes: int = Field(default=60, ge=1, le=24 * 60)


class SearchLogsArgs(BaseModel):
    service: str = Field(pattern=SERVICE_PATTERN)
    query: str = Field(min_length=1, max_length=200)
    limit: int = Field(default=5, ge=1, le=50)


class ListRecentDeploysArgs(BaseModel):
    service: str = Field(pattern=SERVICE_PATTERN)
    hours: int = Field(default=24, ge=1, le=24 * 30)


def _seed(*parts: str) -> int:
    """A stable number from text, so the synthetic metrics and logs repeat exactly."""
    return int(hashlib.sha256("|".join(parts).encode()).hexdigest()[:8], 16)


def fetch_metrics(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    seed = _seed(args["service"], str(args["window_minutes"]))
    deploys = sandbox.deploy_recent(service=args["service"], hours=1)
    # A deploy in the last hour shows as an error spike, as it would on a real dashboard.
    error_rate = round(0.2 + (seed % 40) / 100 + (4.5 if deploys else 0), 2)
    return {
        "service": args["service"],
        "window_minutes": args["window_minutes"],
        "error_rate_pct": error_rate,
        "p95_latency_ms": 120 + seed % 300 + (600 if deploys else 0),
        "requests_per_min": 800 + seed % 2000,
        "source": "sandbox",
    }


def search_logs(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    service, query = args["service"], args["query"]
    seed = _seed(service, query)
    lines = [
        f"{service} ERROR {query} (request {seed % 9000 + 1000 + n}, upstream reset)"
        for n in range(min(args["limit"], 1 + seed % 3))
    ]
    return {"service": service, "query": query, "matches": lines, "source": "sandbox"}


def list_recent_deploys(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    deploys = sandbox.deploy_recent(service=args["service"], hours=args["hours"])
    return {"service": args["service"], "hours": args["hours"], "deploys": deploys}


# --- incident write tools --------------------------------------------------------------------


class CreateIncidentTicketArgs(BaseModel):
    service: str = Field(pattern=SERVICE_PATTERN)
    title: str = Field(min_length=3, max_length=300)
    severity: Severity
    body: str = Field(default="", max_length=5000)


class CloseIncidentTicketArgs(BaseModel):
    ticket_id: int = Field(ge=1)


class DeploySwitchArgs(BaseModel):
    service: str = Field(pattern=SERVICE_PATTERN)
    from_version: str = Field(min_length=1, max_length=50)
    to_version: str = Field(min_length=1, max_length=50)


class NotifyChannelArgs(BaseModel):
    channel: str = Field(default="incidents", pattern=r"^[a-z0-9_-]{1,30}$")
    message: str = Field(min_length=1, max_length=2000)


def create_incident_ticket(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.ticket_create(key=key, **args)


def close_incident_ticket(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.ticket_close(key=key, ticket_id=args["ticket_id"])


def rollback_deploy(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.deploy_switch(key=key, is_rollback=True, **args)


def roll_forward_deploy(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.deploy_switch(key=key, is_rollback=False, **args)


def notify_channel(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.notification_send(
        key=key, channel="slack", recipient=f"#{args['channel']}", message=args["message"]
    )


def _swap_versions(args: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    return {
        "service": args["service"],
        "from_version": args["to_version"],
        "to_version": args["from_version"],
    }


# --- refund ----------------------------------------------------------------------------------


class RefundOrderArgs(BaseModel):
    order_id: str = Field(min_length=1, max_length=50)
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)
    reason: str = Field(min_length=1, max_length=500)
    sku: str = Field(min_length=1, max_length=50)
    quantity: int = Field(default=1, ge=1, le=1000)
    customer_email: str = Field(
        default="customer@example.com", pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=200
    )
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")


class PaymentArgs(BaseModel):
    order_id: str = Field(min_length=1, max_length=50)
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)
    currency: str = Field(default="USD", pattern=r"^[A-Z]{3}$")


class InventoryArgs(BaseModel):
    sku: str = Field(min_length=1, max_length=50)
    quantity: int = Field(ge=1, le=1000)
    reason: str = Field(default="", max_length=200)


class CustomerNotificationArgs(BaseModel):
    order_id: str = Field(min_length=1, max_length=50)
    recipient: str = Field(min_length=3, max_length=200)
    message: str = Field(min_length=1, max_length=2000)


def refund_order(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    raise ToolError(
        "refund_order runs as a saga of payment, inventory and notification steps: "
        "call agents.graphs.refund_agent.saga.refund_saga_run() with the run id"
    )


def refund_payment(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.payment_refund(key=key, **args)


def reverse_refund_payment(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.payment_refund_reverse(key=key, **args)


def restock_inventory(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.inventory_move(
        key=key, sku=args["sku"], delta=args["quantity"], reason=args["reason"]
    )


def unrestock_inventory(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.inventory_move(
        key=key, sku=args["sku"], delta=-args["quantity"], reason=args["reason"]
    )


def notify_customer(args: dict[str, Any], key: str | None) -> dict[str, Any]:
    return sandbox.notification_send(
        key=key, channel="email", recipient=args["recipient"], message=args["message"]
    )


# --- registration ----------------------------------------------------------------------------

for _spec in (
    ToolSpec(
        name="fetch_metrics",
        description="Error rate, latency and traffic of a service over a recent window.",
        args_model=FetchMetricsArgs,
        tier="read",
        run=fetch_metrics,
        blast_radius="Reads metrics of {service}; changes nothing.",
    ),
    ToolSpec(
        name="search_logs",
        description="Recent log lines of a service that match a query.",
        args_model=SearchLogsArgs,
        tier="read",
        run=search_logs,
        blast_radius="Reads logs of {service}; changes nothing.",
    ),
    ToolSpec(
        name="list_recent_deploys",
        description="Deploys of a service in the last hours, newest first.",
        args_model=ListRecentDeploysArgs,
        tier="read",
        run=list_recent_deploys,
        blast_radius="Reads the deploy history of {service}; changes nothing.",
    ),
    ToolSpec(
        name="create_incident_ticket",
        lookup=sandbox.ticket_lookup,
        description="Open an incident ticket for a service.",
        args_model=CreateIncidentTicketArgs,
        tier="write",
        run=create_incident_ticket,
        blast_radius="Opens one {severity} ticket for {service} and pages its on-call team.",
        on_deny="No ticket is opened for {service} and nobody is paged.",
        compensate_with="close_incident_ticket",
        compensation_args=lambda args, result: {"ticket_id": result["ticket_id"]},
    ),
    ToolSpec(
        name="close_incident_ticket",
        description="Close an incident ticket.",
        args_model=CloseIncidentTicketArgs,
        tier="write",
        run=close_incident_ticket,
        blast_radius="Closes ticket {ticket_id}.",
        on_deny="Ticket {ticket_id} stays open.",
    ),
    ToolSpec(
        name="rollback_deploy",
        lookup=sandbox.deploy_lookup,
        description="Roll a service back to its previous version.",
        args_model=DeploySwitchArgs,
        tier="critical",
        run=rollback_deploy,
        blast_radius=(
            "Rolls {service} back from {from_version} to {to_version}: all {service} traffic "
            "moves to the older build within minutes."
        ),
        on_deny="{service} stays on {from_version}, which keeps serving all its traffic.",
        compensate_with="roll_forward_deploy",
        compensation_args=_swap_versions,
    ),
    ToolSpec(
        name="roll_forward_deploy",
        lookup=sandbox.deploy_lookup,
        description="Move a service forward again to a version it was rolled back from.",
        args_model=DeploySwitchArgs,
        tier="critical",
        run=roll_forward_deploy,
        blast_radius="Moves all {service} traffic from {from_version} to {to_version}.",
        on_deny="{service} stays on {from_version}; {to_version} gets no traffic.",
    ),
    ToolSpec(
        name="notify_channel",
        lookup=sandbox.notification_lookup,
        description="Post a message to an internal incident channel.",
        args_model=NotifyChannelArgs,
        tier="read",
        run=notify_channel,
        blast_radius="Posts one message to the internal #{channel} channel.",
        on_deny="Nothing is posted to #{channel}.",
    ),
    ToolSpec(
        name="refund_order",
        description="Refund an order: money back, stock restocked, customer told.",
        args_model=RefundOrderArgs,
        tier="write",
        run=refund_order,
        blast_radius=(
            "Refunds {amount} {currency} on order {order_id}, restocks {quantity} x {sku} and "
            "emails {customer_email}."
        ),
        on_deny=(
            "Order {order_id} is not refunded: no money moves, nothing is restocked and "
            "{customer_email} is not emailed."
        ),
        saga_steps=("refund_payment", "restock_inventory", "notify_customer"),
    ),
    ToolSpec(
        name="refund_payment",
        lookup=sandbox.payment_lookup,
        description="Refund money on an order (a step of an approved refund_order).",
        args_model=PaymentArgs,
        tier="write",
        run=refund_payment,
        blast_radius="Sends {amount} {currency} back to the customer of order {order_id}.",
        on_deny="No money goes back to the customer of order {order_id}.",
        compensate_with="reverse_refund_payment",
    ),
    ToolSpec(
        name="reverse_refund_payment",
        lookup=sandbox.payment_lookup,
        description="Take back a refund (compensation of refund_payment).",
        args_model=PaymentArgs,
        tier="write",
        run=reverse_refund_payment,
        blast_radius="Reverses a refund of {amount} {currency} on order {order_id}.",
        on_deny="The refund of {amount} {currency} on order {order_id} stands.",
    ),
    ToolSpec(
        name="restock_inventory",
        lookup=sandbox.inventory_lookup,
        description="Put returned items back in stock (a step of an approved refund_order).",
        args_model=InventoryArgs,
        tier="write",
        run=restock_inventory,
        blast_radius="Adds {quantity} x {sku} to sellable stock.",
        on_deny="{quantity} x {sku} stay out of sellable stock.",
        compensate_with="unrestock_inventory",
    ),
    ToolSpec(
        name="unrestock_inventory",
        lookup=sandbox.inventory_lookup,
        description="Remove restocked items again (compensation of restock_inventory).",
        args_model=InventoryArgs,
        tier="write",
        run=unrestock_inventory,
        blast_radius="Removes {quantity} x {sku} from sellable stock.",
        on_deny="{quantity} x {sku} stay in sellable stock.",
    ),
    ToolSpec(
        name="notify_customer",
        lookup=sandbox.notification_lookup,
        description="Email the customer about their refund (a step of an approved refund_order).",
        args_model=CustomerNotificationArgs,
        tier="write",
        run=notify_customer,
        blast_radius="Emails {recipient} about order {order_id}.",
        on_deny="{recipient} is not emailed about order {order_id}.",
    ),
):
    tool_register(_spec)
