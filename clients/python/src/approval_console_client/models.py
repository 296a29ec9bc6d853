"""What the console answers about an approval request, as small frozen dataclasses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from .errors import NotDecided

PENDING = "pending"
DECIDED = "decided"
CANCELLED = "cancelled"


@dataclass(frozen=True)
class Approval:
    """One action of a request as the console sees it: its tier, status, and key."""

    id: int
    action_index: int
    tool: str
    tier: str
    status: str
    payload_hash: str
    idempotency_key: str
    url: str = ""
    decision: dict[str, Any] | None = None
    outcome: dict[str, Any] | None = None

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> Approval:
        return cls(
            id=body["id"],
            action_index=body.get("action_index", 0),
            tool=body.get("tool", ""),
            tier=body.get("tier", ""),
            status=body.get("status", ""),
            payload_hash=body.get("payload_hash", ""),
            idempotency_key=body.get("idempotency_key", ""),
            url=body.get("url", ""),
            decision=body.get("decision"),
            outcome=body.get("outcome"),
        )


@dataclass(frozen=True)
class RemoteRequest:
    """An approval request: the body of POST/GET /api/approval-requests/ and of a callback.

    ``created`` is True when this call made it (201), False for a retry (200) or a read.
    ``raw`` keeps the whole body, including fields this version of the client does not know.
    """

    id: str
    thread_id: str
    interrupt_id: str
    status: str
    run_id: str | None = None
    protocol: str = ""
    approvals: tuple[Approval, ...] = ()
    resume: Any = None
    created_at: str | None = None
    decided_at: str | None = None
    created: bool = False
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_body(cls, body: dict[str, Any], *, created: bool = False) -> RemoteRequest:
        return cls(
            id=str(body["id"]),
            thread_id=body.get("thread_id", ""),
            interrupt_id=body.get("interrupt_id", ""),
            status=body.get("status", ""),
            run_id=body.get("run_id"),
            protocol=body.get("protocol", ""),
            approvals=tuple(Approval.from_body(item) for item in body.get("approvals") or ()),
            resume=body.get("resume"),
            created_at=body.get("created_at"),
            decided_at=body.get("decided_at"),
            created=created,
            raw=body,
        )

    @property
    def is_pending(self) -> bool:
        return self.status == PENDING

    @property
    def is_decided(self) -> bool:
        return self.status == DECIDED

    def approval_for(self, action_index: int) -> Approval | None:
        """The approval of the ``action_index``-th action (its position in the request)."""
        return next((a for a in self.approvals if a.action_index == action_index), None)


def resume_value(body_or_request: RemoteRequest | dict[str, Any] | bytes | str) -> Any:
    """What the agent passes to ``Command(resume=...)`` for a decided request.

    Takes a ``RemoteRequest``, a GET or callback body (dict), or the raw JSON of one. Raises
    ``NotDecided`` while the request is pending or when it was cancelled (nothing to resume).
    """
    if isinstance(body_or_request, bytes | str):
        body_or_request = json.loads(body_or_request)
    if isinstance(body_or_request, RemoteRequest):
        status, resume = body_or_request.status, body_or_request.resume
    elif isinstance(body_or_request, dict):
        status, resume = body_or_request.get("status", ""), body_or_request.get("resume")
    else:
        raise TypeError(f"expected a RemoteRequest or its body, got {type(body_or_request)}")
    if status != DECIDED:
        raise NotDecided(status or "unknown")
    return resume
