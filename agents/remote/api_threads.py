"""``POST /api/approval-requests/threads/finish/``: an external agent ends its thread's run."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from agents.remote.api import AGENT_ONLY, _AgentApi
from agents.remote.threads import FINISHED, remote_thread_finish
from core.rest import ErrorSerializer


@extend_schema_serializer(component_name="RemoteThreadFinishInput")
class ThreadFinishInputSerializer(serializers.Serializer):
    thread_id = serializers.CharField(min_length=1, max_length=200)
    status = serializers.ChoiceField(choices=sorted(FINISHED))
    output = serializers.DictField(required=False, default=dict)
    error = serializers.CharField(required=False, allow_blank=True, default="", max_length=5000)


@extend_schema_serializer(component_name="RemoteThreadFinished")
class ThreadFinishedSerializer(serializers.Serializer):
    thread_id = serializers.CharField()
    run_id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=sorted(FINISHED))


class RemoteThreadFinishApi(_AgentApi):
    @extend_schema(
        operation_id="approval_requests_thread_finish",
        auth=AGENT_ONLY,
        request=ThreadFinishInputSerializer,
        responses={
            200: OpenApiResponse(ThreadFinishedSerializer, description="Finished (or already)."),
            400: ErrorSerializer,
            404: OpenApiResponse(ErrorSerializer, description="The thread never sent a request."),
            409: OpenApiResponse(
                ErrorSerializer,
                description="A request is still pending, or the run ended otherwise.",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = ThreadFinishInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        run, _ = remote_thread_finish(
            agent=request.auth,
            thread_id=data["thread_id"],
            status=data["status"],
            output=data["output"],
            error=data["error"],
            request=request,
        )
        body = {"thread_id": data["thread_id"], "run_id": run.pk, "status": run.status}
        return Response(ThreadFinishedSerializer(body).data, status=status.HTTP_200_OK)
