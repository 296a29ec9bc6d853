"""The refund saga: payment, inventory and notification, each step once through the ledger."""

from __future__ import annotations

from typing import Any

from agents.effects.compensation import effect_compensate
from agents.effects.errors import RetryableToolError, ToolError
from agents.effects.ledger import effect_execute, effect_get
from agents.models import Effect
from agents.sandbox.tools import RefundOrderArgs


def refund_saga_steps(args: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(key suffix, tool, args) of each step of an approved refund, in order."""
    return [
        (
            "payment",
            "refund_payment",
            {
                "order_id": args["order_id"],
                "amount": str(args["amount"]),
                "currency": args.get("currency", "USD"),
            },
        ),
        (
            "inventory",
            "restock_inventory",
            {
                "sku": args["sku"],
                "quantity": args["quantity"],
                "reason": f"refund of {args['order_id']}",
            },
        ),
        (
            "notification",
            "notify_customer",
            {
                "order_id": args["order_id"],
                "recipient": args["customer_email"],
                "message": (
                    f"We refunded {args['amount']} {args.get('currency', 'USD')} for order "
                    f"{args['order_id']}: {args['reason']}"
                ),
            },
        ),
    ]


def refund_saga_run(
    *, run_id: str, key: str, args: dict[str, Any], approval_id: int | None = None
) -> dict[str, Any]:
    """Refund across payment, inventory and notification, each step once through the ledger.

    If a step fails, the steps before it are compensated in reverse order (each compensation
    exactly once, key ``<step key>:compensate``) and the outcome says so.
    """
    args = RefundOrderArgs.model_validate(args).model_dump(mode="json")
    steps = refund_saga_steps(args)
    step_keys = [f"{key}:{suffix}" for suffix, _, _ in steps]
    # A replay after the saga was rolled back must not start it again.
    if any(
        (effect := effect_get(key=k)) and effect.status == Effect.Status.COMPENSATED
        for k in step_keys
    ):
        done = [k for k in step_keys if effect_get(key=k)]
        return _saga_rolled_back(done, failed_step=None, error="already rolled back")
    results: dict[str, Any] = {}
    for (suffix, tool, step_args), step_key in zip(steps, step_keys, strict=True):
        try:
            results[suffix] = effect_execute(
                run_id=run_id,
                key=step_key,
                tool=tool,
                args=step_args,
                approval_id=approval_id,
                approved_args=args,
                action_key=key,
            )
        except RetryableToolError:
            # A timeout or a 5xx: the step's outcome is unknown or transient. The run retries
            # and the ledger settles the step by key; compensating now could undo nothing while
            # the money moved (invariant 13).
            raise
        except ToolError as exc:
            done = step_keys[: step_keys.index(step_key)]
            for done_key in reversed(done):
                effect = effect_get(key=done_key)
                if effect is not None:
                    effect_compensate(effect=effect)
            return _saga_rolled_back(done, failed_step=suffix, error=str(exc))
    return {"status": "refunded", "order_id": args["order_id"], "steps": results}


def _saga_rolled_back(done: list[str], *, failed_step: str | None, error: str) -> dict[str, Any]:
    return {
        "status": "rolled_back",
        "failed_step": failed_step,
        "error": error,
        "compensated": [f"{k}:compensate" for k in reversed(done)],
    }
