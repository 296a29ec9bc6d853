"""The remote approval service's REST API (docs/remote.md): external agents only.

Each view authenticates with the agent scheme (agents/remote/auth.py) and refuses a person
(403); an agent reads and reports only on its own requests (404 for any other).
"""

from __future__ import annotations

import threading
import time
import uuid

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from agents.remote import selectors, services
from agents.remote.api_schema import (
    OutcomeInputSerializer,
    RemoteRequestInputSerializer,
    RemoteRequestSerializer,
)
from agents.remote.auth import AgentKeyAuthentication, IsExternalAgent
from agents.remote.bodies import remote_approvals_many
from agents.remote.models import RemoteRequest
from approvals.models import ApprovalRequest
from approvals.services.outcomes import OutcomeConflict, approval_outcome_record
from core.pagination import ApiCursorPagination
from core.rest import ErrorSerializer, page_parameters, paginated

AGENT_ONLY = [{"agentKey": []}]
NOT_FOUND = "No approval request with this id."
REQUEST_ID = OpenApiParameter("request_id", str, OpenApiParameter.PATH)
# Long poll: how often the request is read again while it is pending.
POLL_INTERVAL_SECONDS = 0.5
# A long poll beyond this process's REMOTE_LONG_POLL_CONCURRENCY answers at once (the request
# as it is) with this Retry-After: agents never hold every web thread, people come first.
LONG_POLL_BUSY_RETRY_SECONDS = 2
_slots_lock = threading.Lock()
_slots: tuple[int, threading.BoundedSemaphore] | None = None


def long_poll_slots() -> threading.BoundedSemaphore:
    """This process's long poll slots (REMOTE_LONG_POLL_CONCURRENCY), made on first use (after
    the web server's fork: one set per process)."""
    global _slots
    size = settings.REMOTE_LONG_POLL_CONCURRENCY
    with _slots_lock:
        if _slots is None or _slots[0] != size:
            _slots = (size, threading.BoundedSemaphore(size))
        return _slots[1]


class _AgentApi(APIView):
    # The agent scheme first (its 401 challenge); a person's token or session is recognised
    # only to be refused with a clear 403 (IsExternalAgent).
    authentication_classes = [AgentKeyAuthentication, *api_settings.DEFAULT_AUTHENTICATION_CLASSES]
    permission_classes = [IsExternalAgent]


def _request_or_404(request_id: str, *, request: Request) -> RemoteRequest:
    """The agent's own request; 404 for a malformed, unknown or another agent's id."""
    try:
        pk = uuid.UUID(request_id)
    except ValueError:
        raise NotFound(NOT_FOUND) from None
    try:
        return selectors.remote_request_get(pk=pk, fetched_by=request.auth)
    except RemoteRequest.DoesNotExist:
        raise NotFound(NOT_FOUND) from None


class RemoteRequestCollectionApi(_AgentApi):
    class FilterSerializer(serializers.Serializer):
        thread_id = serializers.CharField(required=False, max_length=200)

    @extend_schema(
        operation_id="approval_requests_list",
        auth=AGENT_ONLY,
        parameters=[OpenApiParameter("thread_id", str), *page_parameters()],
        responses={
            200: paginated(RemoteRequestSerializer, name="RemoteRequestPage"),
            400: ErrorSerializer,
        },
    )
    def get(self, request: Request) -> Response:
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        rows = selectors.remote_request_list(
            fetched_by=request.auth, thread_id=filters.validated_data.get("thread_id")
        )
        paginator = ApiCursorPagination(ordering=("-created_at", "-id"))
        page = list(paginator.paginate_queryset(rows, request, view=self))
        approvals = remote_approvals_many(page)  # one query for the page, not one per request
        return paginator.get_paginated_response(
            [
                services.remote_request_view(remote=remote, approvals=approvals[remote.pk])
                for remote in page
            ]
        )

    @extend_schema(
        operation_id="approval_requests_create",
        auth=AGENT_ONLY,
        request=RemoteRequestInputSerializer,
        responses={
            201: OpenApiResponse(RemoteRequestSerializer, description="Opened."),
            200: OpenApiResponse(
                RemoteRequestSerializer, description="A retry: the request already opened."
            ),
            400: ErrorSerializer,
            403: OpenApiResponse(ErrorSerializer, description="A tool the agent may not ask."),
            409: OpenApiResponse(
                ErrorSerializer, description="Same thread_id and interrupt_id, another value."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = RemoteRequestInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        remote, created = services.remote_request_open(
            agent=request.auth,
            thread_id=data["thread_id"],
            interrupt_id=data["interrupt_id"],
            value=data["value"],
            response_schema=data.get("response_schema"),
            context={key: data.get(key) for key in ("evidence", "rationale", "blast_radius")},
            callback_url=data.get("callback_url") or "",
            run_input=data.get("run_input") or {},
            request=request,
        )
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(services.remote_request_view(remote=remote), status=code)


class RemoteRequestDetailApi(_AgentApi):
    class FilterSerializer(serializers.Serializer):
        wait = serializers.IntegerField(required=False, min_value=0, default=0)

        def validate_wait(self, value: int) -> int:
            limit = settings.REMOTE_LONG_POLL_MAX_SECONDS
            if value > limit:
                raise serializers.ValidationError(f"must be from 0 to {limit}")
            return value

    @extend_schema(
        operation_id="approval_requests_retrieve",
        auth=AGENT_ONLY,
        parameters=[
            REQUEST_ID,
            OpenApiParameter(
                "wait",
                {"type": "integer", "minimum": 0, "maximum": 30},
                description="Long poll: answer as soon as the request is no longer pending, "
                "else after this many seconds (0 to REMOTE_LONG_POLL_MAX_SECONDS, default 0). "
                "When this web process already holds REMOTE_LONG_POLL_CONCURRENCY long polls, "
                "the answer comes at once with a Retry-After header: poll again after it.",
            ),
            OpenApiParameter(
                "Retry-After",
                int,
                OpenApiParameter.HEADER,
                response=[200],
                description="Only on a long poll answered at once because the console's long "
                "poll slots are taken (the request is still pending): seconds to wait before "
                "polling again.",
            ),
        ],
        responses={200: RemoteRequestSerializer, 400: ErrorSerializer, 404: ErrorSerializer},
    )
    def get(self, request: Request, request_id: str) -> Response:
        remote = _request_or_404(request_id, request=request)
        filters = self.FilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        seconds = filters.validated_data["wait"]
        if not seconds or remote.status != RemoteRequest.Status.PENDING:
            return Response(services.remote_request_view(remote=remote))
        slots = long_poll_slots()
        if not slots.acquire(blocking=False):
            # Every long poll slot of this process is taken: the request as it is, at once.
            busy = Response(services.remote_request_view(remote=remote))
            busy["Retry-After"] = str(LONG_POLL_BUSY_RETRY_SECONDS)
            return busy
        try:
            remote = remote_request_wait(remote=remote, seconds=seconds)
        finally:
            slots.release()
        return Response(services.remote_request_view(remote=remote))


def remote_request_wait(*, remote: RemoteRequest, seconds: float) -> RemoteRequest:
    """The request once it is no longer pending, or as it is after ``seconds`` (re-read every
    POLL_INTERVAL_SECONDS: one indexed status read each)."""
    deadline = time.monotonic() + seconds
    while remote.status == RemoteRequest.Status.PENDING and time.monotonic() < deadline:
        time.sleep(min(POLL_INTERVAL_SECONDS, max(0.0, deadline - time.monotonic())))
        moved = RemoteRequest.objects.filter(pk=remote.pk).values_list("status", flat=True)
        if moved.first() != RemoteRequest.Status.PENDING:
            remote = RemoteRequest.objects.select_related("run", "agent").get(pk=remote.pk)
    return remote


class RemoteRequestOutcomeApi(_AgentApi):
    @extend_schema(
        operation_id="approval_requests_outcome",
        auth=AGENT_ONLY,
        parameters=[REQUEST_ID],
        request=OutcomeInputSerializer,
        responses={
            201: OpenApiResponse(RemoteRequestSerializer, description="Recorded."),
            200: OpenApiResponse(RemoteRequestSerializer, description="The same report again."),
            400: ErrorSerializer,
            404: ErrorSerializer,
            409: OpenApiResponse(
                ErrorSerializer,
                description="Another report for this approval, a key that is not the "
                "approval's, or an approval of another request.",
            ),
        },
    )
    def post(self, request: Request, request_id: str) -> Response:
        remote = _request_or_404(request_id, request=request)
        serializer = OutcomeInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        approval = _approval_of(remote, data["approval_id"])
        _outcome, created = approval_outcome_record(
            approval=approval,
            idempotency_key=data["idempotency_key"],
            executed_args=data["executed_args"],
            result=data.get("result"),
            status=data["status"],
            actor=request.user,
            request=request,
        )
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(services.remote_request_view(remote=remote), status=code)


def _approval_of(remote: RemoteRequest, approval_id: int) -> ApprovalRequest:
    approval = (
        ApprovalRequest.objects.select_related("run")
        .filter(pk=approval_id, run_id=remote.run_id, interrupt_id=remote.approval_interrupt_id)
        .first()
    )
    if approval is None:
        raise OutcomeConflict(
            "This approval is not one of this request's.",
            errors={"approval_id": "is not an approval of this request"},
        )
    return approval


__all__ = [
    "RemoteRequestCollectionApi",
    "RemoteRequestDetailApi",
    "RemoteRequestOutcomeApi",
    "remote_request_wait",
]
