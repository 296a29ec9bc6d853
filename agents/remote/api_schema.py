"""The remote API's input serializers and the schema of its one output (agents/remote/bodies.py
builds it; these document it for the OpenAPI schema)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from agents.remote.models import RemoteRequest
from approvals.models import ApprovalOutcome
from core.rest import BodyJSONField

_MAX_PK = 2**63 - 1


@extend_schema_serializer(component_name="RemoteRequestInput")
class RemoteRequestInputSerializer(serializers.Serializer):
    thread_id = serializers.CharField(min_length=1, max_length=200)
    interrupt_id = serializers.CharField(min_length=1, max_length=200)
    value = BodyJSONField(
        help_text="The interrupt value: a LangChain HITLRequest or ToolApprovalRequest, an "
        "Agent Inbox HumanInterrupt, or the console's own payload (its tier is ignored)."
    )
    response_schema = BodyJSONField(required=False, allow_null=True)
    evidence = serializers.ListField(child=BodyJSONField(), required=False, default=list)
    rationale = serializers.CharField(required=False, allow_blank=True, default="")
    blast_radius = serializers.CharField(required=False, allow_blank=True, default="")
    callback_url = serializers.URLField(
        required=False, allow_null=True, allow_blank=True, max_length=500
    )
    run_input = BodyJSONField(required=False, allow_null=True)

    def validate_value(self, value: Any) -> Any:
        if value is None:
            raise serializers.ValidationError("must not be null")
        return value

    def validate_response_schema(self, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object or null")
        return value

    def validate_run_input(self, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object or null")
        return value


@extend_schema_serializer(component_name="RemoteOutcomeInput")
class OutcomeInputSerializer(serializers.Serializer):
    approval_id = serializers.IntegerField(min_value=1, max_value=_MAX_PK)
    idempotency_key = serializers.CharField(max_length=64)
    executed_args = BodyJSONField()
    result = BodyJSONField(required=False, allow_null=True)
    status = serializers.ChoiceField(choices=ApprovalOutcome.Status.choices)

    def validate_executed_args(self, value: Any) -> Any:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class RemoteDecisionSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "edit", "reject", "respond"])
    args = serializers.DictField()
    message = serializers.CharField(allow_blank=True)
    by = serializers.CharField(allow_blank=True)


class RemoteOutcomeSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=ApprovalOutcome.Status.choices)
    args_match = serializers.BooleanField()
    flags = serializers.ListField(
        child=serializers.ChoiceField(choices=["args_differ", "not_approved"])
    )
    reported_at = serializers.DateTimeField()


class RemoteApprovalSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    action_index = serializers.IntegerField()
    tool = serializers.CharField()
    tier = serializers.CharField()
    status = serializers.ChoiceField(
        choices=["pending", "approved", "edited", "rejected", "responded", "expired", "cancelled"]
    )
    payload_hash = serializers.CharField()
    idempotency_key = serializers.CharField(
        help_text="Issued by the console: pass it to the executed call and to the outcome."
    )
    url = serializers.URLField()
    expires_at = serializers.DateTimeField()
    decision = RemoteDecisionSerializer(allow_null=True)
    outcome = RemoteOutcomeSerializer(allow_null=True)


@extend_schema_serializer(component_name="RemoteRequest")
class RemoteRequestSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    thread_id = serializers.CharField()
    interrupt_id = serializers.CharField()
    run_id = serializers.UUIDField()
    status = serializers.ChoiceField(choices=RemoteRequest.Status.choices)
    protocol = serializers.ChoiceField(choices=RemoteRequest.Protocol.choices)
    approvals = RemoteApprovalSerializer(many=True)
    resume = serializers.JSONField(
        allow_null=True, help_text="Once decided: the value to resume the interrupt with."
    )
    created_at = serializers.DateTimeField()
    decided_at = serializers.DateTimeField(allow_null=True)
