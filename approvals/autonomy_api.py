"""The review-after-the-fact API (docs/autonomy.md): actions that ran without waiting, one of
them, and its review (calls the same selectors and service as the pages)."""

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

from approvals import autonomy_selectors, services
from approvals.autonomy_models import AutonomousAction, AutonomyRule
from approvals.contract import payload_on_deny
from approvals.permissions import user_may_review_action
from approvals.serializers import ErasedField, SealedJSONField
from approvals.services.autonomy_review import NOTE_MAX
from core.pagination import ApiCursorPagination
from core.rest import ErrorSerializer, blank_or, page_parameters, paginated
from core.sealing import is_erased
from core.throttles import AnonThrottle, DecideThrottle, UserThrottle

_MAX_PK = 2**63 - 1
NOT_FOUND = "No action with this id."
ACTION_ID = OpenApiParameter("action_id", int, OpenApiParameter.PATH)


@extend_schema_serializer(component_name="AutonomousAction")
class AutonomousActionSerializer(serializers.Serializer):
    """A gated call that ran without waiting for a person, and where its review stands."""

    id = serializers.IntegerField()
    run = serializers.UUIDField(source="run_id")
    agent = serializers.CharField(source="run.agent")
    requested_by = serializers.CharField(source="run.requested_by.get_username")
    key = serializers.CharField(help_text="The action's idempotency key (the sample's seed).")
    tool = serializers.CharField()
    tier = serializers.CharField()
    args = SealedJSONField()
    payload = SealedJSONField()
    payload_hash = serializers.CharField()
    on_deny = serializers.SerializerMethodField(
        help_text="What undoing it does (the payload's on_deny, or what the console knows)."
    )
    mode = serializers.ChoiceField(choices=AutonomyRule.Mode.choices)
    rule = serializers.IntegerField(source="rule_id", allow_null=True)
    sample_percent = serializers.IntegerField()
    draw = serializers.IntegerField(help_text="0-9999 from the key; sampled when below 100×%.")
    confidence = serializers.DecimalField(max_digits=4, decimal_places=3, allow_null=True)
    review = serializers.ChoiceField(choices=AutonomousAction.Review.choices)
    reviewed_by = serializers.SerializerMethodField()
    reviewed_at = serializers.DateTimeField(allow_null=True)
    review_note = serializers.SerializerMethodField()
    erased = ErasedField(at="run.erased_at")
    created_at = serializers.DateTimeField(help_text="When it ran.")

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_on_deny(self, action: AutonomousAction) -> str | None:
        return None if is_erased(action.payload) else payload_on_deny(action.payload)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_review_note(self, action: AutonomousAction) -> str | None:
        """The reviewer's note (null once the run's personal data was erased)."""
        return None if is_erased(action.review_note) else str(action.review_note)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_reviewed_by(self, action: AutonomousAction) -> str | None:
        return action.reviewed_by.get_username() if action.reviewed_by_id else None


@extend_schema_serializer(component_name="ReviewConflict")
class ReviewConflictSerializer(ErrorSerializer):
    """409 on a review: the action's current state, and who reviewed it."""

    reason = serializers.ChoiceField(
        choices=["already_reviewed", "not_pending", "erased", "unreadable"]
    )
    review = serializers.ChoiceField(choices=AutonomousAction.Review.choices)
    reviewed_by = serializers.CharField(allow_null=True)
    reviewed_at = serializers.DateTimeField(allow_null=True)


def action_or_404(action_id: str, *, fetched_by: Any) -> AutonomousAction:
    """The action ``fetched_by`` may see; 404 for a malformed, unknown or hidden id."""
    try:
        pk = int(action_id)
    except ValueError:
        raise NotFound(NOT_FOUND) from None
    if not 0 < pk <= _MAX_PK:
        raise NotFound(NOT_FOUND)
    try:
        return autonomy_selectors.autonomous_action_get(pk=pk, fetched_by=fetched_by)
    except AutonomousAction.DoesNotExist:
        raise NotFound(NOT_FOUND) from None


class AutonomousActionListApi(APIView):
    class FilterSerializer(serializers.Serializer):
        review = serializers.ChoiceField(choices=AutonomousAction.Review.choices, required=False)
        tool = serializers.CharField(required=False, max_length=100)
        tier = serializers.CharField(required=False, max_length=40)
        run = serializers.UUIDField(required=False)
        mine = serializers.BooleanField(required=False, default=False)

        def validate(self, data: dict[str, Any]) -> dict[str, Any]:
            if data.get("mine") and data.get("review", "pending") != "pending":
                raise serializers.ValidationError({"mine": "only with review=pending"})
            return data

    @extend_schema(
        operation_id="autonomous_actions_list",
        parameters=[
            OpenApiParameter("review", enum=AutonomousAction.Review.values),
            OpenApiParameter("tool", str),
            OpenApiParameter("tier", str),
            OpenApiParameter("run", blank_or({"type": "string", "format": "uuid"})),
            OpenApiParameter(
                "mine",
                bool,
                description="Only the pending actions you may review (implies review=pending).",
            ),
            *page_parameters(),
        ],
        responses={
            200: paginated(AutonomousActionSerializer, name="AutonomousActionPage"),
            400: ErrorSerializer,
        },
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        params = filters.validated_data
        common = {"tool": params.get("tool"), "tier": params.get("tier")}
        if params["mine"]:
            actions = autonomy_selectors.autonomous_action_queue(user=request.user, **common)
            if params.get("run"):
                actions = actions.filter(run_id=params["run"])
        else:
            actions = autonomy_selectors.autonomous_action_list(
                fetched_by=request.user,
                review=params.get("review"),
                run_id=params.get("run"),
                **common,
            )
        paginator = ApiCursorPagination(ordering=("created_at", "id"))
        page = paginator.paginate_queryset(actions, request, view=self)
        return paginator.get_paginated_response(AutonomousActionSerializer(page, many=True).data)


class AutonomousActionDetailApi(APIView):
    @extend_schema_serializer(component_name="AutonomousActionDetail")
    class OutputSerializer(AutonomousActionSerializer):
        can_review = serializers.SerializerMethodField()

        @extend_schema_field(OpenApiTypes.BOOL)
        def get_can_review(self, action: AutonomousAction) -> bool:
            """Whether the requesting user may review it now."""
            if action.review != AutonomousAction.Review.PENDING:
                return False
            user = self.context["request"].user
            return user_may_review_action(user=user, tier=action.tier, run=action.run)[0]

    @extend_schema(
        operation_id="autonomous_actions_retrieve",
        parameters=[ACTION_ID],
        responses={200: OutputSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, action_id: str) -> Response:
        action = action_or_404(action_id, fetched_by=request.user)
        return Response(self.OutputSerializer(action, context={"request": request}).data)


class AutonomousActionReviewApi(APIView):
    throttle_classes = [UserThrottle, AnonThrottle, DecideThrottle]

    @extend_schema_serializer(component_name="AutonomousActionReviewInput")
    class InputSerializer(serializers.Serializer):
        verdict = serializers.ChoiceField(
            choices=[("fine", "fine"), ("undo", "undo")],
            help_text="fine: it stands. undo: its compensating action runs exactly once.",
        )
        note = serializers.CharField(
            required=False, allow_blank=True, default="", max_length=NOTE_MAX
        )

    @extend_schema(
        operation_id="autonomous_actions_review",
        parameters=[ACTION_ID],
        request=InputSerializer,
        responses={
            200: AutonomousActionSerializer,
            400: ErrorSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: OpenApiResponse(
                ReviewConflictSerializer, description="Already reviewed, or its run erased."
            ),
            429: OpenApiResponse(ErrorSerializer, description="Too many; see Retry-After."),
        },
    )
    def post(self, request: Request, action_id: str) -> Response:
        action = action_or_404(action_id, fetched_by=request.user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        reviewed = services.autonomous_action_review(
            action=action,
            user=request.user,
            verdict=data["verdict"],
            note=data["note"],
            request=request,
        )
        return Response(AutonomousActionSerializer(reviewed).data, status=status.HTTP_200_OK)
