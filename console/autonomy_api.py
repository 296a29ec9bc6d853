"""GET /api/autonomy/advice/: the autonomy advice for managers (approvals/advice.py), the same
figures as the /autonomy/ page."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.advice import DEMOTE, KEEP, OUTCOMES, PROMOTE, REASONS, SCOPES, Advice
from approvals.advice_selectors import AdviceWindowInvalid, advice_days, autonomy_advice_report
from approvals.autonomy_models import AutonomyRule
from console.metrics.definitions import user_may_view_metrics
from core.rest import ErrorSerializer


def _counts(names: tuple[str, ...]) -> type[serializers.Serializer]:
    fields = {name: serializers.IntegerField() for name in names}
    return type("Counts", (serializers.Serializer,), fields)


def _rates(names: tuple[str, ...]) -> type[serializers.Serializer]:
    fields = {name: serializers.FloatField(allow_null=True) for name in names}
    return type("Rates", (serializers.Serializer,), fields)


@extend_schema_serializer(component_name="AutonomyOutcomeCounts")
class OutcomeCountsSerializer(_counts(OUTCOMES)):
    pass


@extend_schema_serializer(component_name="AutonomyOutcomeRates")
class OutcomeRatesSerializer(_rates(OUTCOMES)):
    """Approve/edit/reject/respond: shares of the volume; expired: of all closed."""


@extend_schema_serializer(component_name="AutonomyReasonCounts")
class ReasonCountsSerializer(_counts(REASONS)):
    pass


class AdviceFiguresSerializer(serializers.Serializer):
    volume = serializers.IntegerField(help_text="Closed approvals decided by a person.")
    closed = serializers.IntegerField(help_text="Volume plus the expired ones.")
    outcomes = OutcomeCountsSerializer()
    rates = OutcomeRatesSerializer()
    reasons = ReasonCountsSerializer(help_text="Rejections by reason (those with one).")
    severe_rejections = serializers.IntegerField(help_text="Rejections whose reason is unsafe.")
    median_seconds = serializers.FloatField(allow_null=True, help_text="Within 1%.")
    reviewed = serializers.IntegerField(help_text="Autonomous actions reviewed after the fact.")
    undone = serializers.IntegerField(help_text="Of those, undone (or undoing, undo failed).")
    undo_share = serializers.FloatField(allow_null=True)
    shadow_decided = serializers.IntegerField()
    shadow_agreed = serializers.IntegerField()
    shadow_agreement = serializers.FloatField(allow_null=True)


class AdviceSerializer(serializers.Serializer):
    scope = serializers.ChoiceField(choices=SCOPES)
    key = serializers.CharField(help_text="The tool's or the tier's name.")
    tier = serializers.CharField(help_text="A tool's tier (its policy's, else its last seen).")
    mode = serializers.ChoiceField(choices=AutonomyRule.Mode.choices)
    mode_from = serializers.CharField(help_text='"tool", "tier" (its tier\'s rule) or "" (none)')
    recommendation = serializers.ChoiceField(choices=(PROMOTE, DEMOTE, KEEP))
    target_mode = serializers.CharField(help_text='What applying sets: "sampled", "ask" or "".')
    may_start_shadow = serializers.BooleanField()
    evidence = serializers.ListField(child=serializers.CharField(), source="evidence_words")
    figures = AdviceFiguresSerializer()


class AdviceThresholdsSerializer(serializers.Serializer):
    promote_approve_rate = serializers.FloatField()
    promote_min_volume = serializers.IntegerField()
    demote_reject_rate = serializers.FloatField()
    demote_undo_rate = serializers.FloatField()


class AutonomyAdviceApi(APIView):
    """GET /api/autonomy/advice/?days=N: promote, demote or keep, per tool and per tier, with
    the figures and the thresholds they were compared with (managers and admins)."""

    @extend_schema_serializer(component_name="AutonomyAdvice")
    class OutputSerializer(serializers.Serializer):
        days = serializers.IntegerField()
        since = serializers.DateTimeField()
        until = serializers.DateTimeField()
        thresholds = AdviceThresholdsSerializer()
        tools = AdviceSerializer(many=True)
        tiers = AdviceSerializer(many=True)

    @extend_schema(
        operation_id="autonomy_advice",
        parameters=[OpenApiParameter("days", int, description="window in whole UTC days, 1..365")],
        responses={200: OutputSerializer, 400: ErrorSerializer, 403: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        if not user_may_view_metrics(request.user):
            raise PermissionDenied("Only managers and admins may see the autonomy advice.")
        try:
            days = advice_days(request.query_params.get("days"))
        except AdviceWindowInvalid as exc:
            raise ValidationError({"days": [str(exc)]}) from None
        report = autonomy_advice_report(days=days)

        def row(advice: Advice) -> dict[str, Any]:
            return {
                **advice.__dict__,
                "figures": advice.figures.as_dict(),
                "may_start_shadow": advice.may_start_shadow,
            }

        body = {
            "days": report.days,
            "since": report.since,
            "until": report.now,
            "thresholds": report.thresholds.as_dict(),
            "tools": [row(a) for a in report.tools],
            "tiers": [row(a) for a in report.tiers],
        }
        return Response(self.OutputSerializer(body).data)
