"""An autonomous action a reviewer undid before its effect ran never runs it afterwards
(docs/autonomy.md): the claim reads the action's review state under a row lock, in the claim's
own transaction, so an undo and a claim take turns on the action's row.

The review service sets ``undoing`` under the same row lock; the undo task then finds every
effect claimed before it, and no effect is claimed after it.
"""

from __future__ import annotations

from typing import Any

from agents.effects.errors import ToolError
from agents.models import Effect
from approvals.autonomy_models import AutonomousAction

UNDONE = (
    AutonomousAction.Review.UNDOING,
    AutonomousAction.Review.UNDONE,
    AutonomousAction.Review.UNDO_FAILED,
)


class ActionUndone(ToolError):
    """The call ran without waiting, a reviewer undid it before its effect was claimed: the
    effect never runs (409, like an effect a person settled as not done)."""

    reason = "undone by review before it ran"
    approval_id: int | None = None

    def __init__(self, message: str, *, run_id: Any) -> None:
        super().__init__(message, status=409)
        self.run_id = run_id


def action_undone_check(*, key: str, action: str, run_id: Any, approved: bool) -> None:
    """Inside the claim's transaction, before the INSERT: refuse the effect ``key`` of the
    action ``action`` (its idempotency key) whose undo was asked. ``approved``: a person's
    approval (or a compensation) authorizes this effect, no autonomous action: nothing to read."""
    if approved:
        return
    review = (
        AutonomousAction.objects.select_for_update()
        .filter(key=action)
        .values_list("review", flat=True)
        .first()
    )
    if review in UNDONE and not Effect.objects.filter(key=key).exists():
        # (An effect claimed before the undo answers from its row: the undo compensates it.)
        raise ActionUndone(
            f"not called: the call under {action} ran without waiting and a reviewer "
            "undid it before its effect ran",
            run_id=run_id,
        )
