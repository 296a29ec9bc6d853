"""Approvals API: the queue, one approval, and the decision (calls the same services as the pages)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals import selectors, services
from approvals.canary_api import ApprovalDecidedSerializer, approval_decided_data
from approvals.changes import approval_changes, changes_digest
from approvals.claim_selectors import claims_attach
from approvals.deadlines import approval_deadlines
from approvals.decision_context import approval_outcome
from approvals.models import ApprovalOutcome, ApprovalRequest
from approvals.permissions import user_may_decide
from approvals.serializers import ApprovalSerializer, SealedJSONField
from core.pagination import ApiCursorPagination
from core.rest import BodyJSONField, ErrorSerializer, blank_or, page_parameters, paginated
from core.throttles import AnonThrottle, DecideThrottle, UserThrottle

# Primary keys are bigints; anything outside is simply not found (never a database error).
_MAX_PK = 2**63 - 1


@extend_schema_serializer(component_name="DecisionConflict")
class ConflictSerializer(ErrorSerializer):
    """409 on a decision: who decided it, or why it can no longer be decided."""

    reason = serializers.ChoiceField(
        choices=["already_decided", "already_voted", "expired", "hash_mismatch"]
    )
    status = serializers.CharField()
    decided_by = serializers.CharField(allow_null=True)
    decided_at = serializers.DateTimeField(allow_null=True)


class ChangeSerializer(serializers.Serializer):
    """One thing that changed while the approval waited."""

    kind = serializers.ChoiceField(choices=["agent_version", "args_schema", "policy"])
    summary = serializers.CharField()
    before = serializers.CharField()
    after = serializers.CharField()
    by = serializers.CharField(allow_null=True)
    at = serializers.DateTimeField(allow_null=True)


@extend_schema_serializer(component_name="ChangesNotAcknowledged")
class ChangesSerializer(ErrorSerializer):
    """428 on a decision: what changed while it waited; send changes_digest as changes_seen."""

    changes = ChangeSerializer(many=True)
    changes_digest = serializers.CharField()


class DeadlinesSerializer(serializers.Serializer):
    """What happens if nobody decides (null once decided)."""

    at = serializers.DateTimeField(help_text="When the tier's default decision applies.")
    decision = serializers.ChoiceField(
        choices=["reject", "approve", "edit"],
        help_text="edit: an approve of the round an edit vote opened (its args run).",
    )
    by = serializers.CharField()
    remind_at = serializers.DateTimeField(allow_null=True)
    reminded_at = serializers.DateTimeField(allow_null=True)
    escalate_at = serializers.DateTimeField(allow_null=True)
    escalated_at = serializers.DateTimeField(allow_null=True)
    escalation_group = serializers.CharField(allow_null=True)


@extend_schema_serializer(component_name="ApprovalOutcome")
class OutcomeSerializer(serializers.Serializer):
    """What an external agent reported executing; ``flags`` never hides a mismatch."""

    status = serializers.ChoiceField(choices=ApprovalOutcome.Status.choices)
    idempotency_key = serializers.CharField()
    args_match = serializers.BooleanField()
    flags = serializers.ListField(child=serializers.CharField())
    executed_args = SealedJSONField()
    result = SealedJSONField()
    reported_by = serializers.CharField()
    reported_at = serializers.DateTimeField()


APPROVAL_ID = OpenApiParameter("approval_id", int, OpenApiParameter.PATH)
NOT_FOUND = "No approval with this id."


def approval_or_404(approval_id: str, *, fetched_by: Any) -> ApprovalRequest:
    """The approval ``fetched_by`` may see; 404 for a malformed, unknown or hidden id."""
    try:
        return selectors.approval_get(pk=_approval_pk(approval_id), fetched_by=fetched_by)
    except ApprovalRequest.DoesNotExist:
        raise NotFound(NOT_FOUND) from None


def _approval_pk(approval_id: str) -> int:
    try:
        pk = int(approval_id)
    except ValueError:
        raise NotFound(NOT_FOUND) from None
    if not 0 < pk <= _MAX_PK:
        raise NotFound(NOT_FOUND)
    return pk


class ApprovalListApi(APIView):
    class FilterSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=ApprovalRequest.Status.choices, required=False)
        tier = serializers.CharField(required=False)
        agent = serializers.CharField(required=False)
        tool = serializers.CharField(required=False)
        run = serializers.UUIDField(required=False)
        q = serializers.CharField(required=False)
        mine = serializers.BooleanField(required=False, default=False)
        assigned = serializers.ChoiceField(choices=["me"], required=False)

        def validate(self, data: dict[str, Any]) -> dict[str, Any]:
            if data.get("assigned") and data.get("status", "pending") != "pending":
                raise serializers.ValidationError({"assigned": "only with status=pending"})
            return data

    @extend_schema(
        operation_id="approvals_list",
        parameters=[
            OpenApiParameter(
                "status",
                enum=ApprovalRequest.Status.values,
                description="pending lists approvals that can still be decided (unexpired).",
            ),
            OpenApiParameter("tier", str),
            OpenApiParameter("agent", str),
            OpenApiParameter("tool", str),
            OpenApiParameter("run", blank_or({"type": "string", "format": "uuid"})),
            OpenApiParameter("q", str, description="Search tool, agent and requester."),
            OpenApiParameter(
                "mine", bool, description="With status=pending: only those you may decide."
            ),
            OpenApiParameter(
                "assigned",
                enum=["me"],
                description="me: the pending approvals assigned to you (implies status=pending).",
            ),
            *page_parameters(),
        ],
        responses={200: paginated(ApprovalSerializer, name="ApprovalPage"), 400: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        common = {key: params.get(key) for key in ("tier", "agent", "tool", "q")}
        if params.get("assigned") or params.get("status") == ApprovalRequest.Status.PENDING:
            approvals = selectors.approval_list_pending(
                user=request.user,
                mine=params["mine"],
                run_id=params.get("run"),
                assigned=bool(params.get("assigned")),
                **common,
            )
        else:
            approvals = selectors.approval_list(
                fetched_by=request.user,
                status=params.get("status"),
                run_id=params.get("run"),
                **common,
            )
        paginator = ApiCursorPagination(ordering=("expires_at", "id"))
        page = claims_attach(paginator.paginate_queryset(approvals, request, view=self))
        return paginator.get_paginated_response(ApprovalSerializer(page, many=True).data)


class ApprovalDetailApi(APIView):
    @extend_schema_serializer(component_name="ApprovalDetail")
    class OutputSerializer(ApprovalSerializer):
        can_decide = serializers.SerializerMethodField()

        @extend_schema_field(OpenApiTypes.BOOL)
        def get_can_decide(self, approval: ApprovalRequest) -> bool:
            """Whether the requesting user may decide it now."""
            user = self.context["request"].user
            return approval.is_pending and user_may_decide(user=user, approval=approval)[0]

        outcome = serializers.SerializerMethodField()

        @extend_schema_field(OutcomeSerializer(allow_null=True))
        def get_outcome(self, approval: ApprovalRequest) -> dict[str, Any] | None:
            """An external agent's report of what it executed (null: none, or in-process)."""
            outcome = approval_outcome(approval)
            return OutcomeSerializer(outcome).data if outcome is not None else None

        if_nobody_decides = serializers.SerializerMethodField()
        changes = serializers.SerializerMethodField()
        changes_digest = serializers.SerializerMethodField()

        @extend_schema_field(DeadlinesSerializer(allow_null=True))
        def get_if_nobody_decides(self, approval: ApprovalRequest) -> dict[str, Any] | None:
            deadlines = approval_deadlines(approval=approval)
            return deadlines.as_dict() if deadlines else None

        @extend_schema_field(ChangeSerializer(many=True))
        def get_changes(self, approval: ApprovalRequest) -> list[dict[str, Any]]:
            """What changed while it waited (empty when nothing did, or once decided)."""
            return [change.as_dict() for change in self._changes(approval)]

        @extend_schema_field(OpenApiTypes.STR)
        def get_changes_digest(self, approval: ApprovalRequest) -> str:
            """Send it as changes_seen to decide an approval with changes ("" without)."""
            changes = self._changes(approval)
            return changes_digest(changes) if changes else ""

        def _changes(self, approval: ApprovalRequest) -> list[Any]:
            cache = self.context.setdefault("changes", {})
            if approval.pk not in cache:
                cache[approval.pk] = approval_changes(approval)
            return cache[approval.pk]

    @extend_schema(
        operation_id="approvals_retrieve",
        parameters=[APPROVAL_ID],
        responses={200: OutputSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, approval_id: str) -> Response:
        approval = approval_or_404(approval_id, fetched_by=request.user)
        data = self.OutputSerializer(approval, context={"request": request}).data
        return Response(data)


class ApprovalDecideApi(APIView):
    # The decision limit (shared with the approval page) on top of the API's own.
    throttle_classes = [UserThrottle, AnonThrottle, DecideThrottle]

    @extend_schema_serializer(component_name="ApprovalDecisionInput")
    class InputSerializer(serializers.Serializer):
        decision = serializers.ChoiceField(choices=ApprovalRequest.Decision.choices)
        payload_hash = serializers.CharField(
            help_text="The payload_hash of the approval you reviewed; a stale one gets 409."
        )
        args = BodyJSONField(
            required=False, allow_null=True, help_text="The edited args (decision edit only)."
        )
        message = serializers.CharField(
            required=False, allow_blank=True, default="", help_text="Sent back to the agent."
        )
        note = serializers.CharField(
            required=False, allow_blank=True, default="", help_text="Kept in the audit trail."
        )
        changes_seen = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            help_text="The changes_digest of the changes you saw; needed when what the approval "
            "rests on changed while it waited (else 428).",
        )
        reason = serializers.ChoiceField(
            choices=ApprovalRequest.RejectReason.choices,
            required=False,
            allow_blank=True,
            default="",
            help_text="Why you reject (reject only; unsafe: it would have caused harm).",
        )

        def validate_args(self, value: Any) -> Any:
            if value is not None and not isinstance(value, dict):
                raise serializers.ValidationError("must be a JSON object")
            return value

    @extend_schema(
        operation_id="approvals_decide",
        parameters=[APPROVAL_ID],
        request=InputSerializer,
        responses={
            200: ApprovalDecidedSerializer,
            400: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: OpenApiResponse(
                ConflictSerializer, description="Already decided, expired, or stale payload hash."
            ),
            428: OpenApiResponse(
                ChangesSerializer,
                description="What the approval rests on changed while it waited; confirm it.",
            ),
            429: OpenApiResponse(
                ErrorSerializer, description="Too many decisions; see Retry-After."
            ),
        },
    )
    def post(self, request: Request, approval_id: str) -> Response:
        # An approval one may not see is not found (ids are sequential: a 403 naming its tier
        # would tell anyone which exist); one may see but not decide gets the service's 403.
        approval = approval_or_404(approval_id, fetched_by=request.user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        # A refusal (services.DecisionError) becomes its error body in console.http.
        approval = services.approval_decide(
            approval=approval,
            user=request.user,
            decision=data["decision"],
            seen_hash=data["payload_hash"],
            args=data.get("args"),
            message=data["message"],
            note=data["note"],
            request=request,
            changes_seen=data["changes_seen"] or None,
            reason=data["reason"],
        )
        return Response(approval_decided_data(approval, request.user), status=status.HTTP_200_OK)
