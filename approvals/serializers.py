"""How an approval reads in the APIs (the approvals API, and the runs API's run detail)."""

from __future__ import annotations

from rest_framework import serializers

from approvals.models import ApprovalRequest


class ApprovalSerializer(serializers.Serializer):
    """An approval as the reviewer sees it; ``payload_hash`` is what a decision must echo."""

    id = serializers.IntegerField()
    run = serializers.UUIDField(source="run_id")
    agent = serializers.CharField(source="run.agent")
    requested_by = serializers.CharField(source="run.requested_by.get_username")
    interrupt_id = serializers.CharField()
    action_index = serializers.IntegerField()
    tool = serializers.CharField()
    args = serializers.JSONField()
    payload = serializers.JSONField()
    payload_hash = serializers.CharField()
    tier = serializers.CharField()
    allowed_decisions = serializers.ListField(child=serializers.CharField())
    status = serializers.ChoiceField(choices=ApprovalRequest.Status.choices)
    decided_by = serializers.CharField(source="decided_by_label", allow_blank=True)
    decided_at = serializers.DateTimeField(allow_null=True)
    decision = serializers.JSONField()
    expires_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
