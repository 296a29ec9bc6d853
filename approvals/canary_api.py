"""Canaries in the API: what a decision's answer adds after a test proposal, and compliance's
report (GET /api/canaries/report/)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.canary_selectors import canary_report, canary_told_for, user_may_read_canaries
from approvals.models import ApprovalRequest
from approvals.serializers import ApprovalSerializer
from approvals.services.canaries import canary_told
from core.rest import ErrorSerializer


class CanaryToldSerializer(serializers.Serializer):
    template = serializers.CharField()
    title = serializers.CharField()
    outcome = serializers.CharField(help_text="caught, missed or expired")
    message = serializers.CharField(source="line")


class ApprovalDecidedSerializer(ApprovalSerializer):
    """The decided approval; ``canary`` only when it was a test proposal planted by compliance
    (never before the decision: a pending canary reads exactly like a real approval)."""

    canary = CanaryToldSerializer(source="canary_told", required=False)


def approval_decided_data(approval: ApprovalRequest, user: Any) -> dict[str, Any]:
    """The decide API's answer; a canary's decider is told (and that is recorded)."""
    told = canary_told_for(approval=approval, user=user)
    if told:
        approval.canary_told = told
        if told["decided"]:
            canary_told(canary=told["canary"])
    return ApprovalDecidedSerializer(approval).data


class CanaryReviewerSerializer(serializers.Serializer):
    reviewer = serializers.CharField()
    seen = serializers.IntegerField()
    caught = serializers.IntegerField()
    missed = serializers.IntegerField()
    catch_rate = serializers.FloatField(source="rate", allow_null=True)
    last_miss = serializers.DateTimeField(allow_null=True)


class CanaryRowSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    approval = serializers.IntegerField(source="approval_id")
    run = serializers.UUIDField(source="run_id")
    template = serializers.CharField()
    tier = serializers.CharField()
    planted_at = serializers.DateTimeField()
    decided_by = serializers.CharField(source="decided_by.username", allow_null=True, default=None)
    decision = serializers.CharField()
    outcome = serializers.CharField(help_text='caught, missed, expired, or "" while open')
    decided_at = serializers.DateTimeField(allow_null=True)
    seconds_to_decision = serializers.FloatField(source="seconds", allow_null=True)


class CanaryPlanSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    tier = serializers.CharField(source="tier.name")
    per_day = serializers.IntegerField()
    templates = serializers.ListField(child=serializers.CharField())
    problem = serializers.CharField(
        help_text="Why the plan plants nothing now (no template whose tool's real calls wait "
        "in its tier, no requester), or empty."
    )


class CanaryReportApi(APIView):
    """GET /api/canaries/report/: each reviewer's catch rate, recent canaries, plans in force."""

    class OutputSerializer(serializers.Serializer):
        reviewers = CanaryReviewerSerializer(many=True)
        recent = CanaryRowSerializer(many=True)
        plans = CanaryPlanSerializer(many=True)
        open = serializers.IntegerField(help_text="Canaries planted and not decided yet.")

    @extend_schema(
        operation_id="canaries_report",
        responses={200: OutputSerializer, 403: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        if not user_may_read_canaries(request.user):
            raise PermissionDenied("Only compliance and admins may read the canary report.")
        return Response(self.OutputSerializer(canary_report(fetched_by=request.user)).data)
