"""How an approval reads in the APIs (the approvals API, and the runs API's run detail)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from approvals.claim_selectors import approval_claim_live
from approvals.contract import payload_on_deny
from approvals.models import ApprovalClaim, ApprovalRequest
from core.sealing import is_erased


class SealedJSONField(serializers.JSONField):
    """A sealed value as stored opened; ``null`` once the run's personal data was erased."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> Any:
        return None if is_erased(value) else super().to_representation(value)


@extend_schema_field(OpenApiTypes.BOOL)
class ErasedField(serializers.Field):
    """Whether the run's personal data was erased (its sealed fields read null). ``at``: the
    dotted path from the object to the run's ``erased_at``."""

    def __init__(self, *, at: str, **kwargs: Any) -> None:
        self.at = at
        kwargs.update(source="*", read_only=True)
        kwargs.setdefault("help_text", "The run's personal data was erased: its data reads null.")
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> bool:
        for part in self.at.split("."):
            value = getattr(value, part)
        return value is not None


class ClaimSerializer(serializers.Serializer):
    """Who holds a pending approval: a claim (lapses at ``until``) or an assignment (no
    ``until``; ``assigned_by`` names who assigned it)."""

    by = serializers.CharField(source="user.get_username")
    since = serializers.DateTimeField()
    until = serializers.DateTimeField(allow_null=True)
    assigned_by = serializers.SerializerMethodField()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_assigned_by(self, claim: ApprovalClaim) -> str | None:
        return claim.assigned_by.get_username() if claim.assigned_by_id else None


class ApprovalSerializer(serializers.Serializer):
    """An approval as the reviewer sees it; ``payload_hash`` is what a decision must echo."""

    id = serializers.IntegerField()
    run = serializers.UUIDField(source="run_id")
    agent = serializers.CharField(source="run.agent")
    requested_by = serializers.CharField(source="run.requested_by.get_username")
    interrupt_id = serializers.CharField()
    action_index = serializers.IntegerField()
    tool = serializers.CharField()
    args = SealedJSONField()
    payload = SealedJSONField()
    payload_hash = serializers.CharField()
    on_deny = serializers.SerializerMethodField(
        help_text="What happens if it is rejected (the payload's on_deny, or what the console "
        "knows without one)."
    )
    tier = serializers.CharField()
    allowed_decisions = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=ApprovalRequest.Status.choices)
    decided_by = serializers.CharField(source="decided_by_label", allow_blank=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    decision = SealedJSONField()
    reject_reason = serializers.ChoiceField(
        choices=ApprovalRequest.RejectReason.choices,
        allow_blank=True,
        help_text="Why it was rejected (blank: not said, or not rejected).",
    )
    erased = ErasedField(at="run.erased_at")
    expires_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()

    def get_on_deny(self, approval: ApprovalRequest) -> str | None:
        return None if is_erased(approval.payload) else payload_on_deny(approval.payload)

    claim = serializers.SerializerMethodField()

    @extend_schema_field(ClaimSerializer(allow_null=True))
    def get_claim(self, approval: ApprovalRequest) -> dict[str, Any] | None:
        """Who is looking at it or was assigned it; null when free, lapsed or decided."""
        claim = approval_claim_live(approval=approval)
        return ClaimSerializer(claim).data if claim is not None else None
