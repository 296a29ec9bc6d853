"""Runs and agents API: start, list, read and cancel runs; list the registered agents."""

from __future__ import annotations

import uuid
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

from agents import services
from agents.models import Effect
from agents.runtime.registry import AgentSpec, agent_list
from approvals import selectors
from approvals.models import AgentRun
from approvals.permissions import user_may_cancel
from approvals.run_errors import error_summary
from approvals.serializers import ApprovalSerializer, ErasedField, SealedJSONField
from core.pagination import ApiCursorPagination
from core.rest import BodyJSONField, ErrorSerializer, error_response, page_parameters, paginated

IDEMPOTENCY_HEADER = "Idempotency-Key"
IDEMPOTENCY_KEY_MAX = 200


RUN_ID = OpenApiParameter("run_id", OpenApiTypes.UUID, OpenApiParameter.PATH)


NOT_FOUND = "No run with this id."


def run_or_404(run_id: str, *, fetched_by: Any) -> AgentRun:
    """The run ``fetched_by`` may see; 404 for a malformed, unknown or hidden id."""
    try:
        return selectors.run_get(pk=_run_pk(run_id), fetched_by=fetched_by)
    except AgentRun.DoesNotExist:
        raise NotFound(NOT_FOUND) from None


def _run_pk(run_id: str) -> uuid.UUID:
    try:
        return uuid.UUID(run_id)
    except ValueError:
        raise NotFound(NOT_FOUND) from None


def _printable_ascii(text: str) -> bool:
    return all(" " <= char <= "~" for char in text)


class RunSerializer(serializers.Serializer):
    """A run in lists."""

    id = serializers.UUIDField()
    agent = serializers.CharField()
    graph_version = serializers.CharField()
    status = serializers.ChoiceField(choices=AgentRun.Status.choices)
    requested_by = serializers.CharField(source="requested_by.get_username")
    flag = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    erased = ErasedField(at="erased_at")


class EffectSerializer(serializers.Serializer):
    key = serializers.CharField()
    tool = serializers.CharField()
    status = serializers.ChoiceField(choices=Effect.Status.choices)
    approval = serializers.IntegerField(source="approval_id", allow_null=True)
    attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class RunDetailSerializer(RunSerializer):
    """A run with its input, outcome, approvals and the effects it applied."""

    input = SealedJSONField()
    output = SealedJSONField()
    error = serializers.SerializerMethodField(
        help_text="One line: the exception's type and message (admins see the traceback); "
        '"" once erased.'
    )
    resume_count = serializers.IntegerField()
    failure_count = serializers.IntegerField()
    steps_used = serializers.IntegerField()
    tokens_used = serializers.IntegerField()
    cancel_requested = serializers.BooleanField()
    approvals = serializers.SerializerMethodField()
    effects = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.STR)
    def get_error(self, run: AgentRun) -> str:
        return error_summary(run.error)

    @extend_schema_field(ApprovalSerializer(many=True))
    def get_approvals(self, run: AgentRun) -> list[dict[str, Any]]:
        return ApprovalSerializer(selectors.run_approvals(run=run), many=True).data

    @extend_schema_field(EffectSerializer(many=True))
    def get_effects(self, run: AgentRun) -> list[dict[str, Any]]:
        return EffectSerializer(run.effects.order_by("created_at", "id"), many=True).data


class RunListApi(APIView):
    class FilterSerializer(serializers.Serializer):
        status = serializers.ChoiceField(choices=AgentRun.Status.choices, required=False)
        agent = serializers.CharField(required=False)

    @extend_schema(
        operation_id="runs_list",
        parameters=[
            OpenApiParameter("status", enum=AgentRun.Status.values),
            OpenApiParameter("agent", str),
            *page_parameters(),
        ],
        responses={200: paginated(RunSerializer, name="RunPage"), 400: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        filters = RunListApi.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        runs = selectors.run_list(fetched_by=request.user, **filters.validated_data)
        paginator = ApiCursorPagination(ordering=("-created_at", "-id"))
        page = paginator.paginate_queryset(runs, request, view=self)
        return paginator.get_paginated_response(RunSerializer(page, many=True).data)


class RunStartApi(APIView):
    @extend_schema_serializer(component_name="RunStartInput")
    class InputSerializer(serializers.Serializer):
        agent = serializers.CharField(max_length=100, help_text="A name from GET /api/agents/.")
        input = BodyJSONField(help_text="A JSON object valid for the agent's input schema.")

        def validate_input(self, value: Any) -> Any:
            if not isinstance(value, dict):
                raise serializers.ValidationError("must be a JSON object")
            return value

    @extend_schema(
        operation_id="runs_start",
        request=InputSerializer,
        parameters=[
            OpenApiParameter(
                IDEMPOTENCY_HEADER,
                str,
                location=OpenApiParameter.HEADER,
                description=(
                    "Same key and body: the same run (200). Same key, other body: 422. "
                    "First request still in flight: 409."
                ),
            )
        ],
        responses={
            201: RunDetailSerializer,
            200: OpenApiResponse(RunDetailSerializer, description="Replay of an Idempotency-Key."),
            400: ErrorSerializer,
            409: ErrorSerializer,
            422: ErrorSerializer,
        },
    )
    def post(self, request: Request) -> Response:
        serializer = RunStartApi.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        key = request.headers.get(IDEMPOTENCY_HEADER)
        if key is not None:
            key = key.strip()
            if not key or len(key) > IDEMPOTENCY_KEY_MAX or not _printable_ascii(key):
                return error_response(
                    status_code=400,
                    detail=f"Invalid {IDEMPOTENCY_HEADER} header.",
                    errors={
                        IDEMPOTENCY_HEADER: f"1 to {IDEMPOTENCY_KEY_MAX} printable ASCII characters"
                    },
                )
        start = {"agent": data["agent"], "input": data["input"], "user": request.user}
        # A refusal (services.RunStartError) becomes its error body in console.http.
        if key is None:
            run, created = services.run_start(**start, request=request), True
        else:
            run, created = services.run_start_idempotent(key=key, **start, request=request)
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(RunDetailSerializer(run).data, status=code)


class RunCollectionApi(RunListApi, RunStartApi):
    """GET /api/runs/ lists runs, POST /api/runs/ starts one: two operations, one URL."""


class RunDetailApi(APIView):
    @extend_schema(
        operation_id="runs_retrieve",
        parameters=[RUN_ID],
        responses={200: RunDetailSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, run_id: str) -> Response:
        return Response(RunDetailSerializer(run_or_404(run_id, fetched_by=request.user)).data)


class RunCancelApi(APIView):
    @extend_schema(
        operation_id="runs_cancel",
        parameters=[RUN_ID],
        request=None,
        responses={
            200: RunDetailSerializer,
            403: ErrorSerializer,
            404: ErrorSerializer,
            409: OpenApiResponse(ErrorSerializer, description="The run already finished."),
        },
    )
    def post(self, request: Request, run_id: str) -> Response:
        # A run one may not see is not found (as on the page); one may see but not cancel, 403.
        run = run_or_404(run_id, fetched_by=request.user)
        if not user_may_cancel(user=request.user, run=run):
            return error_response(
                status_code=403,
                detail="Only the requester, staff, or approvers may cancel this run.",
            )
        run = services.run_cancel(run=run, user=request.user, request=request)
        if run.status != AgentRun.Status.CANCELLED:
            return error_response(
                status_code=409,
                detail=f"The run already finished ({run.status}).",
                errors={"status": run.status},
            )
        return Response(RunDetailSerializer(run).data)


class AgentListApi(APIView):
    @extend_schema_serializer(component_name="Agent")
    class OutputSerializer(serializers.Serializer):
        name = serializers.CharField()
        version = serializers.CharField()
        description = serializers.CharField(allow_blank=True)
        example_input = serializers.JSONField()
        input_schema = serializers.SerializerMethodField()

        @extend_schema_field(OpenApiTypes.OBJECT)
        def get_input_schema(self, spec: AgentSpec) -> dict[str, Any] | None:
            """JSON schema of the run input, when the agent declares an input model."""
            return spec.input_model.model_json_schema() if spec.input_model else None

    @extend_schema(operation_id="agents_list", responses={200: OutputSerializer(many=True)})
    def get(self, request: Request) -> Response:
        return Response(self.OutputSerializer(agent_list(), many=True).data)
