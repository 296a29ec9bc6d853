"""Input of the refund agent. Its state is create_agent's (messages) plus the gate's keys."""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, Field


class RefundInput(BaseModel):
    """A customer's refund request.

    A sku starting with DISCONTINUED makes the sandbox inventory refuse the restock, and a
    customer_email ending in .invalid makes the sandbox notifier refuse the email: both make a
    saga step fail on purpose.
    """

    order_id: str = Field(min_length=1, max_length=50)
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)
    reason: str = Field(min_length=1, max_length=500)
    sku: str = Field(min_length=1, max_length=50)
    quantity: int = Field(default=1, ge=1, le=1000)
    customer_email: str = Field(
        default="customer@example.com", pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$", max_length=200
    )
