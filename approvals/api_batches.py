"""Batches API: the reader's batches, and one decision for several items of one batch (the same
selector and service as the batch pages)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.batch_selectors import batch_list
from approvals.models import ApprovalRequest
from approvals.selectors import approval_get
from approvals.services.batches import BATCH_DECISIONS, BATCH_MAX_ITEMS, approval_batch_decide
from approvals.services.errors import DecisionInvalid
from core.rest import ErrorSerializer
from core.throttles import AnonThrottle, DecideThrottle, UserThrottle

_MAX_PK = 2**63 - 1


class _JSONString(serializers.CharField):
    """A string, and only a string: DRF's CharField would read a number as its text, and the
    per-item answer (200) would then accept a body its schema refuses."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class _JSONInteger(serializers.IntegerField):
    """An integer, and only an integer (not "1", 1.0 or true)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_serializer(component_name="ApprovalBatch")
class BatchSerializer(serializers.Serializer):
    """Related pending approvals the reader may decide together."""

    key = serializers.CharField(help_text="<agent>/<tool>/<tier>")
    agent = serializers.CharField()
    tool = serializers.CharField()
    tier = serializers.CharField()
    count = serializers.IntegerField()
    oldest = serializers.DateTimeField(help_text="When its oldest item was requested.")


@extend_schema_serializer(component_name="ApprovalBatchItemInput")
class BatchItemSerializer(serializers.Serializer):
    id = _JSONInteger(min_value=1, max_value=_MAX_PK)
    payload_hash = _JSONString(
        help_text="The payload_hash of this approval as you reviewed it; stale: 409 for it."
    )


@extend_schema_serializer(component_name="ApprovalBatchItemResult")
class BatchItemResultSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    status = serializers.IntegerField(
        help_text="200 decided or voted; 403 not yours to decide; 409 stale hash, decided "
        "meanwhile, expired or already voted; 428 changes to acknowledge on its own page."
    )
    outcome = serializers.CharField(
        help_text="approved, rejected, voted (counted toward a quorum), forbidden, changes, "
        "invalid, or the 409's reason: hash_mismatch, already_decided, expired, "
        "already_voted, erased, unreadable."
    )
    detail = serializers.CharField()
    received = serializers.IntegerField(allow_null=True)
    required = serializers.IntegerField(allow_null=True)


class ApprovalBatchListApi(APIView):
    @extend_schema_serializer(component_name="ApprovalBatchList")
    class OutputSerializer(serializers.Serializer):
        results = BatchSerializer(many=True)

    @extend_schema(operation_id="approvals_batches_list", responses={200: OutputSerializer})
    def get(self, request: Request) -> Response:
        results = [
            {
                "key": summary.batch.key,
                "agent": summary.batch.agent,
                "tool": summary.batch.tool,
                "tier": summary.batch.tier,
                "count": summary.count,
                "oldest": summary.oldest,
            }
            for summary in batch_list(user=request.user)
        ]
        return Response(self.OutputSerializer({"results": results}).data)


class ApprovalBatchDecideApi(APIView):
    # The decision limit (shared with the approval page): a batch counts as one request.
    throttle_classes = [UserThrottle, AnonThrottle, DecideThrottle]

    @extend_schema_serializer(component_name="ApprovalBatchDecisionInput")
    class InputSerializer(serializers.Serializer):
        decision = serializers.ChoiceField(choices=[(d, d) for d in BATCH_DECISIONS])
        items = serializers.ListField(
            child=BatchItemSerializer(), min_length=1, max_length=BATCH_MAX_ITEMS
        )
        message = _JSONString(
            required=False, allow_blank=True, default="", help_text="Sent back to each agent."
        )

    @extend_schema_serializer(component_name="ApprovalBatchDecision")
    class OutputSerializer(serializers.Serializer):
        batch = serializers.CharField(help_text="<agent>/<tool>/<tier>")
        results = BatchItemResultSerializer(many=True)

    @extend_schema(
        operation_id="approvals_batch_decide",
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            400: OpenApiResponse(
                ErrorSerializer,
                description="Bad input, or an item not of the first item's batch (same agent, "
                "tool and tier): nothing decided; errors names items[i].id.",
            ),
            429: OpenApiResponse(
                ErrorSerializer, description="Too many decisions; see Retry-After."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        items = [(item["id"], item["payload_hash"]) for item in data["items"]]
        try:  # the batch is the first item's
            first = approval_get(pk=items[0][0], fetched_by=request.user)
        except ApprovalRequest.DoesNotExist:
            raise DecisionInvalid(
                f"No approval #{items[0][0]}.", errors={"items[0].id": "no such approval"}
            ) from None
        agent, tool, tier = first.run.agent, first.tool, first.tier
        results = approval_batch_decide(
            user=request.user,
            decision=data["decision"],
            items=items,
            message=data["message"],
            agent=agent,
            tool=tool,
            tier=tier,
            request=request,
        )
        body = {"batch": f"{agent}/{tool}/{tier}", "results": [r.as_dict() for r in results]}
        return Response(self.OutputSerializer(body).data)
