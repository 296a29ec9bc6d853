"""API sign-in (tokens: obtain, list, revoke), the manager metrics, and the API's own documentation."""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.http import HttpResponse
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_serializer,
)
from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from console.lockout import client_ip, login_failure_record, login_failures_clear, login_locked_for
from console.metrics.definitions import (
    GROUP_DEFAULT,
    GROUPS,
    OUTCOMES,
    WINDOW_DEFAULT,
    WINDOW_MAX,
    WINDOW_MIN,
    user_may_view_metrics,
)
from console.metrics.report import metrics_report, report_as_dict
from console.tokens import NAME_MAX, token_create, token_list, token_revoke, token_revoke_all
from core.rest import ErrorSerializer, error_response
from core.throttles import TokenIpThrottle, TokenUsernameThrottle


class TokenOutputSerializer(serializers.Serializer):
    """A token as listed: never its secret."""

    token_key = serializers.CharField(help_text="Its first characters, to tell tokens apart.")
    name = serializers.CharField(help_text="The device or client it was made for.")
    created = serializers.DateTimeField()
    expiry = serializers.DateTimeField(allow_null=True)
    last_used_at = serializers.DateTimeField(allow_null=True)


class TokenObtainApi(APIView):
    """Exchange a username and password for a new API token (send it as `Token <token>`).

    Each call makes another token (one per device, named by ``name``); the secret is in this
    answer only. Tokens expire after API_TOKEN_TTL_HOURS and can be revoked.
    """

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [TokenIpThrottle, TokenUsernameThrottle]

    @extend_schema_serializer(component_name="TokenInput")
    class InputSerializer(serializers.Serializer):
        username = serializers.CharField()
        password = serializers.CharField(trim_whitespace=False, style={"input_type": "password"})
        name = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            max_length=NAME_MAX,
            help_text="The device or client this token is for (shown in your token list).",
        )

    @extend_schema_serializer(component_name="Token")
    class OutputSerializer(TokenOutputSerializer):
        token = serializers.CharField(help_text="The secret: shown once, stored only hashed.")

    @extend_schema(
        operation_id="auth_token",
        request=InputSerializer,
        responses={
            200: OutputSerializer,
            400: ErrorSerializer,
            429: OpenApiResponse(
                ErrorSerializer, description="Too many attempts; see Retry-After."
            ),
        },
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        username = serializer.validated_data["username"]
        ip = client_ip(request)
        # The login page's lock-out holds here too (the same password is being guessed).
        wait = login_locked_for(username=username, ip=ip)
        if wait:
            return _locked(wait)
        user = authenticate(
            request=request._request,
            username=username,
            password=serializer.validated_data["password"],
        )
        if user is None or not user.is_active:
            wait = login_failure_record(username=username, ip=ip)
            if wait:
                return _locked(wait)
            return error_response(
                status_code=400,
                detail="Unable to log in with these credentials.",
                errors={"non_field_errors": "wrong username or password"},
            )
        login_failures_clear(username=username)
        token, secret = token_create(
            user=user, name=serializer.validated_data["name"], request=request
        )
        data = {**TokenOutputSerializer(token).data, "token": secret}
        response = Response(self.OutputSerializer(data).data)
        response["Cache-Control"] = "no-store"  # it holds the secret (RFC 6749 5.1)
        return response


def _locked(wait: int) -> Response:
    response = error_response(
        status_code=429,
        detail=f"Too many failed attempts. Expected available in {wait} seconds.",
    )
    response["Retry-After"] = str(wait)
    return response


class TokenListApi(APIView):
    """GET: my tokens that have not expired (never their secrets). DELETE: revoke them all."""

    @extend_schema_serializer(component_name="TokensRevoked")
    class RevokedSerializer(serializers.Serializer):
        revoked = serializers.IntegerField()

    @extend_schema(
        operation_id="auth_tokens_list", responses={200: TokenOutputSerializer(many=True)}
    )
    def get(self, request: Request) -> Response:
        tokens = token_list(fetched_by=request.user)
        return Response(TokenOutputSerializer(tokens, many=True).data)

    @extend_schema(
        operation_id="auth_tokens_revoke_all",
        description="Revoke every token of mine (the one of this request too).",
        responses={200: RevokedSerializer},
    )
    def delete(self, request: Request) -> Response:
        revoked = token_revoke_all(user=request.user, request=request)
        return Response({"revoked": revoked})


class TokenRevokeApi(APIView):
    """DELETE: revoke one of my tokens, named by its token_key."""

    @extend_schema(
        operation_id="auth_tokens_revoke",
        parameters=[OpenApiParameter("token_key", str, OpenApiParameter.PATH)],
        responses={204: None, 404: ErrorSerializer},
    )
    def delete(self, request: Request, token_key: str) -> Response:
        if not token_revoke(user=request.user, token_key=token_key, request=request):
            raise NotFound("No such token.")
        return Response(status=204)


def _keyed(name: str, keys: tuple[str, ...], field: type) -> type[serializers.Serializer]:
    """A serializer class with one field per key (documents a fixed-key object)."""
    return type(name, (serializers.Serializer,), {key: field(allow_null=True) for key in keys})


MetricsOutcomes = _keyed("MetricsOutcomes", OUTCOMES, serializers.IntegerField)
MetricsRates = _keyed("MetricsRates", OUTCOMES, serializers.FloatField)
MetricsPercentiles = _keyed("MetricsPercentiles", ("p50", "p90", "p95"), serializers.FloatField)


class MetricsCanariesSerializer(serializers.Serializer):
    seen = serializers.IntegerField()
    caught = serializers.IntegerField()
    missed = serializers.IntegerField()
    catch_rate = serializers.FloatField(
        allow_null=True, help_text="caught / (caught + missed); expired canaries do not count."
    )


class MetricsRowSerializer(serializers.Serializer):
    key = serializers.CharField()
    label = serializers.CharField()
    requests = serializers.IntegerField()
    pending = serializers.IntegerField(help_text="Requests of the window still pending.")
    closed = serializers.IntegerField(help_text="Decided by a person, or expired.")
    outcomes = MetricsOutcomes()
    rates = MetricsRates(help_text="Shares of the closed requests (null when none closed).")
    time_to_decision_seconds = MetricsPercentiles(help_text="Nearest-rank, decisions by a person.")
    escalated = serializers.IntegerField()
    reminded = serializers.IntegerField()
    queue_depth = serializers.IntegerField(help_text="Pending now, any age.")
    oldest_pending_at = serializers.DateTimeField(allow_null=True)
    oldest_pending_age_seconds = serializers.FloatField(allow_null=True)
    fatigue = serializers.BooleanField()
    canaries = MetricsCanariesSerializer(
        allow_null=True, help_text="Reviewer rows: canaries decided in the window; else null."
    )


class MetricsFatigueSerializer(serializers.Serializer):
    dimension = serializers.ChoiceField(choices=["reviewer", "tool"])
    key = serializers.CharField()
    approve_rate = serializers.FloatField()
    median_seconds = serializers.FloatField()
    decisions = serializers.IntegerField()
    reason = serializers.CharField()
    catch_rate = serializers.FloatField(allow_null=True)


class MetricsBucketSerializer(serializers.Serializer):
    label = serializers.CharField()
    count = serializers.IntegerField()


class MetricsDaySerializer(serializers.Serializer):
    date = serializers.DateField()
    approve = serializers.IntegerField()
    edit = serializers.IntegerField()
    reject = serializers.IntegerField()
    respond = serializers.IntegerField()
    expired = serializers.IntegerField()


class MetricsThresholdsSerializer(serializers.Serializer):
    approval_rate = serializers.FloatField()
    median_seconds = serializers.FloatField()
    canary_catch_rate = serializers.FloatField()
    canary_min_seen = serializers.IntegerField()


class MetricsApi(APIView):
    """GET /api/metrics/: approval metrics for managers (definitions in console/metrics.py)."""

    class InputSerializer(serializers.Serializer):
        window = serializers.IntegerField(
            min_value=WINDOW_MIN, max_value=WINDOW_MAX, default=WINDOW_DEFAULT
        )
        group = serializers.ChoiceField(choices=GROUPS, default=GROUP_DEFAULT)

    @extend_schema_serializer(component_name="Metrics")
    class OutputSerializer(serializers.Serializer):
        window_days = serializers.IntegerField()
        group = serializers.ChoiceField(choices=GROUPS)
        since = serializers.DateTimeField()
        now = serializers.DateTimeField()
        fatigue_thresholds = MetricsThresholdsSerializer()
        total = MetricsRowSerializer()
        rows = MetricsRowSerializer(many=True)
        fatigue = MetricsFatigueSerializer(many=True)
        decisions_per_day = MetricsDaySerializer(many=True)
        time_to_decision = MetricsBucketSerializer(many=True)
        queue_age = MetricsBucketSerializer(many=True)
        runs_by_status = serializers.DictField(child=serializers.IntegerField())
        exact = serializers.BooleanField(
            help_text="true: from the window's rows; false: from the rollups (whole UTC days)"
        )
        percentile_relative_error = serializers.FloatField(
            help_text="bound on the percentiles' relative error (0.01 from the rollups)"
        )

    @extend_schema(
        operation_id="metrics",
        parameters=[
            OpenApiParameter("window", int, description=f"days ({WINDOW_MIN}..{WINDOW_MAX})"),
            OpenApiParameter("group", str, enum=list(GROUPS)),
        ],
        responses={200: OutputSerializer, 400: ErrorSerializer, 403: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        if not user_may_view_metrics(request.user):
            raise PermissionDenied("Only managers and admins may see the metrics.")
        params = self.InputSerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        report = metrics_report(
            window_days=params.validated_data["window"], group=params.validated_data["group"]
        )
        return Response(self.OutputSerializer(report_as_dict(report)).data)


class ApiDocsView(SpectacularSwaggerSplitView):
    """The Swagger page, its setup script served from its own URL (``?script``): no inline
    script, so it works under the Content-Security-Policy. OPTIONS answers with the allowed methods only: DRF's metadata body has
    no HTML template, so the inherited OPTIONS was a 500."""

    def options(self, request: Request, *args, **kwargs) -> HttpResponse:
        response = HttpResponse()
        response.headers["Allow"] = ", ".join(self.allowed_methods)
        return response
