"""django-q2 tasks of the approvals app: each fetches by id and calls one service, with one
data-key cache for the task (core.sealing.scoped)."""

from __future__ import annotations

from approvals.notifications import notification_deliver as _deliver
from approvals.notifications import notifications_deliver as _deliver_many
from approvals.services import approvals_sweep as _sweep
from approvals.services.canaries import canaries_plant_due as _canaries
from approvals.services.slack import slack_respond as _slack_respond
from approvals.services.stuck import stuck_sweep as _stuck
from core.sealing import scoped


@scoped
def approvals_sweep() -> dict[str, int]:
    """Every minute (Schedule): remind, escalate, expire, retry notifications; then raise and
    clear stuck runs and queues (approvals/services/stuck.py); then plant the canaries due
    (approvals/services/canaries.py)."""
    return {**_sweep(), **_stuck(), "canaries": _canaries()}


@scoped
def notification_deliver(notification_id: int) -> str:
    return _deliver(notification_id=notification_id)


@scoped
def notifications_deliver(notification_ids: list[int]) -> dict[str, int]:
    """The rows one transaction wrote, in one task (see notifications_deliver_enqueue)."""
    return _deliver_many(notification_ids=notification_ids)


def slack_respond(response_url: str, answer: dict) -> str:
    """The answer to a Slack button press, POSTed to its response_url (approvals/services/slack.py)."""
    return _slack_respond(response_url=response_url, answer=answer)
