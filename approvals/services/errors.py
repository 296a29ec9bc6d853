"""Why a decision was refused; each maps to its HTTP status (core.errors.ApplicationError)."""

from __future__ import annotations

from typing import Any

from approvals.models import ApprovalRequest
from core.errors import ApplicationError


class DecisionError(ApplicationError):
    """A decision that was not recorded (400 unless a subclass says otherwise)."""


class DecisionInvalid(DecisionError):
    """Bad input (400); ``errors`` names the fields."""


class ArgsInvalid(DecisionInvalid):
    """Edited args that fail the tool's args schema (400); ``errors`` names ``args.<field>``."""


class DecisionForbidden(DecisionError):
    status_code = 403


class DecisionConflict(DecisionError):
    """Already decided, expired, or the payload hash does not match (409)."""

    status_code = 409

    def __init__(self, message: str, *, reason: str, approval: ApprovalRequest):
        errors = {}
        if reason == "hash_mismatch":
            errors["payload_hash"] = "does not match the approval's current payload"
        super().__init__(message, errors=errors)
        self.reason = reason
        self.approval = approval

    def extra(self) -> dict[str, Any]:
        """Who decided it (or why it can no longer be decided), as the 409 body says."""
        return {
            "reason": self.reason,
            "status": self.approval.status,
            "decided_by": self.approval.decided_by_label or None,
            "decided_at": self.approval.decided_at,
        }


class PreviewRequired(DecisionError):
    """An edit whose confirmation does not match the diff the reviewer was shown (428).

    ``preview`` is the diff to show now; ``stale`` says a confirmation came for other values.
    Only the page asks for it (``approval_decide(require_preview=True)``), and shows the
    preview as the next step rather than as a failure.
    """

    status_code = 428

    def __init__(self, *, preview: dict[str, Any], stale: bool):
        super().__init__(
            "The values changed after your preview: check the differences again."
            if stale
            else "Check the differences, then confirm the edit."
        )
        self.preview = preview
        self.stale = stale


class ChangesNotAcknowledged(DecisionError):
    """What the approval rests on changed while it waited (agent version, args schema,
    policy) and the decision did not confirm exactly these changes (428).

    ``changes`` (``approvals.changes.Change``) and their ``digest``, which a decision sends
    back as ``changes_seen``; ``stale`` says a confirmation came for other changes.
    """

    status_code = 428

    def __init__(self, *, changes: list[Any], digest: str, stale: bool):
        super().__init__(
            "What this approval rests on changed again since you confirmed: check the changes."
            if stale
            else "What this approval rests on changed while it waited: confirm you have seen "
            "the changes, then decide.",
            errors={"changes_seen": "must be the digest of the changes shown (changes_digest)"},
        )
        self.changes = changes
        self.digest = digest
        self.stale = stale

    def extra(self) -> dict[str, Any]:
        return {
            "changes": [change.as_dict() for change in self.changes],
            "changes_digest": self.digest,
        }
