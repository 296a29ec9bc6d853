"""Sandbox stand-ins for external systems: tickets, deploys, payments, inventory, notifications.

Each write behaves like a remote API with idempotency keys (as Stripe's): it commits on its own,
in its own transaction (invariant 9), and a second call with the same key returns the first
result and creates nothing; the same key with other parameters is refused.
``settings.SANDBOX_EFFECT_DELAY_S`` holds the answer back after the row is committed, which
opens the window the crash tests kill a worker in.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from decimal import Decimal
from typing import Any, TypeVar

from django.conf import settings
from django.db import IntegrityError, models, transaction
from django.utils import timezone

from agents.effects.errors import ToolError
from agents.models import (
    SandboxDeploy,
    SandboxInventoryMovement,
    SandboxNotification,
    SandboxPayment,
    SandboxTicket,
)
from audit.canonical import payload_hash

Row = TypeVar("Row", bound=models.Model)

# Test hooks that behave like real downstream refusals.
REJECTED_SKU_PREFIX = "DISCONTINUED"
REJECTED_RECIPIENT_SUFFIX = ".invalid"


class SandboxError(ToolError):
    """The sandbox refused the request (a 4xx: retrying will not help)."""


def _write(
    model: type[Row],
    *,
    key: str,
    request: dict[str, Any],
    create: Callable[[], dict[str, Any]],
) -> Row:
    """Create the row for ``key`` once, in its own committed transaction."""
    request_hash = payload_hash(request)
    row = model.objects.filter(idempotency_key=key).first()
    if row is None:
        try:
            with transaction.atomic(durable=True):
                row = model.objects.create(
                    idempotency_key=key, request_hash=request_hash, **create()
                )
        except IntegrityError:
            # A concurrent call with the same key won the insert.
            row = model.objects.get(idempotency_key=key)
    if row.request_hash != request_hash:
        raise SandboxError(
            f"idempotency key {key!r} was already used with other parameters", status=409
        )
    _effect_delay()
    return row


def _lookup(
    model: type[Row], key: str, result: Callable[[Row], dict[str, Any]]
) -> dict[str, Any] | None:
    """What the system did under ``key``, as a provider's "retrieve by idempotency key" API:
    the answer it gave then, or None when it never acted."""
    row = model.objects.filter(idempotency_key=key).first()
    return result(row) if row is not None else None


def _effect_delay() -> None:
    if settings.SANDBOX_EFFECT_DELAY_S:
        time.sleep(settings.SANDBOX_EFFECT_DELAY_S)


def _require_key(key: str | None) -> str:
    if not key:
        raise SandboxError("an idempotency key is required for writes")
    return key


# --- tickets ---------------------------------------------------------------------------------


def ticket_result(ticket: SandboxTicket) -> dict[str, Any]:
    return {
        "ticket_id": ticket.pk,
        "ticket": f"TICKET-{ticket.pk}",
        "service": ticket.service,
        "severity": ticket.severity,
        "status": ticket.status,
    }


def ticket_create(
    *, key: str | None, service: str, title: str, severity: str, body: str = ""
) -> dict[str, Any]:
    request = {"service": service, "title": title, "severity": severity, "body": body}
    ticket = _write(SandboxTicket, key=_require_key(key), request=request, create=lambda: request)
    return ticket_result(ticket)


def ticket_lookup(key: str) -> dict[str, Any] | None:
    return _lookup(SandboxTicket, key, ticket_result)


def ticket_close(*, key: str | None, ticket_id: int) -> dict[str, Any]:
    """Close a ticket; closing a closed ticket changes nothing (naturally idempotent)."""
    _require_key(key)
    with transaction.atomic(durable=True):
        ticket = SandboxTicket.objects.select_for_update().filter(pk=ticket_id).first()
        if ticket is None:
            raise SandboxError(f"ticket {ticket_id} does not exist", status=404)
        if ticket.status != SandboxTicket.Status.CLOSED:
            ticket.status = SandboxTicket.Status.CLOSED
            ticket.save(update_fields=["status"])
    _effect_delay()
    return ticket_result(ticket)


# --- deploys ---------------------------------------------------------------------------------


def deploy_current(*, service: str) -> SandboxDeploy | None:
    return SandboxDeploy.objects.filter(service=service).order_by("-deployed_at", "-id").first()


def deploy_recent(*, service: str, hours: int = 24) -> list[dict[str, Any]]:
    since = timezone.now() - dt.timedelta(hours=hours)
    rows = SandboxDeploy.objects.filter(service=service, deployed_at__gte=since).order_by(
        "-deployed_at", "-id"
    )
    return [deploy_result(row) for row in rows]


def deploy_result(deploy: SandboxDeploy) -> dict[str, Any]:
    return {
        "deploy_id": deploy.pk,
        "service": deploy.service,
        "version": deploy.version,
        "previous_version": deploy.previous_version,
        "is_rollback": deploy.is_rollback,
        "deployed_at": deploy.deployed_at.isoformat(),
    }


def deploy_lookup(key: str) -> dict[str, Any] | None:
    return _lookup(SandboxDeploy, key, deploy_result)


def deploy_record(
    *,
    service: str,
    version: str,
    previous_version: str = "",
    deployed_at: dt.datetime | None = None,
) -> SandboxDeploy:
    """Seed a deploy, as the sandbox deploy system would report it (demo data and tests)."""
    return SandboxDeploy.objects.create(
        idempotency_key=f"seed:{service}:{version}:{(deployed_at or timezone.now()).isoformat()}",
        service=service,
        version=version,
        previous_version=previous_version,
        deployed_at=deployed_at or timezone.now(),
    )


def deploy_switch(
    *, key: str | None, service: str, from_version: str, to_version: str, is_rollback: bool
) -> dict[str, Any]:
    """Move ``service`` from ``from_version`` to ``to_version`` (a rollback or a roll forward)."""
    key = _require_key(key)
    request = {
        "service": service,
        "from_version": from_version,
        "to_version": to_version,
        "is_rollback": is_rollback,
    }

    def create() -> dict[str, Any]:
        current = deploy_current(service=service)
        if current is None or current.version != from_version:
            running = current.version if current else "nothing"
            raise SandboxError(
                f"{service} runs {running}, not {from_version}: refusing to switch", status=409
            )
        return {
            "service": service,
            "version": to_version,
            "previous_version": from_version,
            "is_rollback": is_rollback,
            "deployed_at": timezone.now(),
        }

    return deploy_result(_write(SandboxDeploy, key=key, request=request, create=create))


# --- payments --------------------------------------------------------------------------------


def payment_result(payment: SandboxPayment) -> dict[str, Any]:
    return {
        "payment_id": payment.pk,
        "order_id": payment.order_id,
        "kind": payment.kind,
        "amount": str(payment.amount),
        "currency": payment.currency,
    }


def payment_lookup(key: str) -> dict[str, Any] | None:
    return _lookup(SandboxPayment, key, payment_result)


def payment_refund(
    *, key: str | None, order_id: str, amount: Decimal | str, currency: str = "USD"
) -> dict[str, Any]:
    """Refund ``amount`` (positive) on an order: a negative money movement."""
    amount = Decimal(str(amount))
    if amount <= 0:
        raise SandboxError("refund amount must be positive")
    request = {"order_id": order_id, "amount": str(amount), "currency": currency}
    payment = _write(
        SandboxPayment,
        key=_require_key(key),
        request={**request, "kind": SandboxPayment.Kind.REFUND},
        create=lambda: {
            "order_id": order_id,
            "kind": SandboxPayment.Kind.REFUND,
            "amount": -amount,
            "currency": currency,
        },
    )
    return payment_result(payment)


def payment_refund_reverse(
    *, key: str | None, order_id: str, amount: Decimal | str, currency: str = "USD"
) -> dict[str, Any]:
    """Take a refund back: a positive money movement of the refunded amount."""
    amount = Decimal(str(amount))
    request = {"order_id": order_id, "amount": str(amount), "currency": currency}
    payment = _write(
        SandboxPayment,
        key=_require_key(key),
        request={**request, "kind": SandboxPayment.Kind.REFUND_REVERSAL},
        create=lambda: {
            "order_id": order_id,
            "kind": SandboxPayment.Kind.REFUND_REVERSAL,
            "amount": amount,
            "currency": currency,
        },
    )
    return payment_result(payment)


# --- inventory -------------------------------------------------------------------------------


def inventory_move(*, key: str | None, sku: str, delta: int, reason: str = "") -> dict[str, Any]:
    if sku.upper().startswith(REJECTED_SKU_PREFIX):
        raise SandboxError(f"sku {sku} is discontinued: the inventory service refuses it")
    request = {"sku": sku, "delta": delta, "reason": reason}
    row = _write(
        SandboxInventoryMovement, key=_require_key(key), request=request, create=lambda: request
    )
    return inventory_result(row)


def inventory_result(row: SandboxInventoryMovement) -> dict[str, Any]:
    return {"movement_id": row.pk, "sku": row.sku, "delta": row.delta}


def inventory_lookup(key: str) -> dict[str, Any] | None:
    return _lookup(SandboxInventoryMovement, key, inventory_result)


# --- notifications ---------------------------------------------------------------------------


def notification_send(
    *, key: str | None, channel: str, recipient: str, message: str
) -> dict[str, Any]:
    if recipient.lower().endswith(REJECTED_RECIPIENT_SUFFIX):
        raise SandboxError(f"recipient {recipient} is not deliverable", status=422)
    request = {"channel": channel, "recipient": recipient, "message": message}
    row = _write(
        SandboxNotification, key=_require_key(key), request=request, create=lambda: request
    )
    return notification_result(row)


def notification_result(row: SandboxNotification) -> dict[str, Any]:
    return {"notification_id": row.pk, "channel": row.channel, "recipient": row.recipient}


def notification_lookup(key: str) -> dict[str, Any] | None:
    return _lookup(SandboxNotification, key, notification_result)
