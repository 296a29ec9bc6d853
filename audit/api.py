"""Audit API: the log (cursor pagination), chain verification, streamed exports."""

from __future__ import annotations

from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_serializer,
)
from rest_framework import serializers
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.exports import CONTENT_TYPES, export_filename, export_stream
from audit.forms import DATE_MAX, DATE_MIN, FILTER_FIELDS, filter_form
from audit.manifests import export_start
from audit.models import AuditEvent, AuditExport
from audit.private import events_data_open
from audit.selectors import event_list, user_may_read, user_sees_all
from audit.verify import chain_verify_db
from core.pagination import ApiCursorPagination
from core.rest import ErrorSerializer, blank_or, page_parameters, paginated

_DATE = blank_or({"type": "string", "format": "date"})
_FILTER_TYPES = {
    "date_from": _DATE,
    "date_to": _DATE,
    "run": blank_or({"type": "string", "format": "uuid"}),
    "approval": blank_or({"type": "integer", "minimum": 1, "maximum": 2**63 - 1}),
    "actor": {"type": "string", "maxLength": 200},
    "action": {"type": "string", "maxLength": 80},
    "tool": {"type": "string", "maxLength": 100},
}
FILTER_PARAMETERS = [
    OpenApiParameter(
        name,
        _FILTER_TYPES.get(name, OpenApiTypes.STR),
        description=f"filter: {name} (days from {DATE_MIN} to {DATE_MAX})"
        if name.startswith("date_")
        else f"filter: {name}",
    )
    for name in FILTER_FIELDS
]
OPEN_PARAMETER = OpenApiParameter(
    "open",
    {"type": "string", "enum": ["", "0", "1", "false", "true"]},
    description=(
        "1: each event also carries its data with sealed personal values opened, or "
        '"erased" (JSONL key "opened", format audit-jsonl/3; CSV column data_opened). The '
        "hashed fields stay as stored, so the file verifies either way."
    ),
)
_OPEN_VALUES = {"": False, "0": False, "false": False, "1": True, "true": True}
AUDIT_PAGE_SIZE, AUDIT_MAX_PAGE_SIZE = 50, 500
LIST_PARAMETERS = [
    *FILTER_PARAMETERS,
    *page_parameters(max_page_size=AUDIT_MAX_PAGE_SIZE, default=AUDIT_PAGE_SIZE),
]


def _filters(request: Request):
    form = filter_form(request.query_params)
    if not form.is_valid():
        raise ValidationError(
            {
                ("non_field_errors" if field == "__all__" else field): " ".join(messages)
                for field, messages in form.errors.items()
            }
        )
    return form


class AuditEventListApi(APIView):
    """GET /api/audit/: the events this user may see, newest first."""

    @extend_schema_serializer(component_name="AuditEvent")
    class OutputSerializer(serializers.ModelSerializer):
        # The record as a reader sees it: sealed keys opened, or "erased" (audit.private).
        data = serializers.SerializerMethodField()

        @extend_schema_field({"type": "object", "additionalProperties": True})
        def get_data(self, event: AuditEvent) -> dict:
            return self.context["opened"][event.seq]

        class Meta:
            model = AuditEvent
            fields = (
                "seq",
                "at",
                "actor",
                "actor_user_id",
                "actor_username",
                "action",
                "run_id",
                "approval_id",
                "tool",
                "data",
                "ip",
                "user_agent",
                "prev_hash",
                "hash",
            )

    @extend_schema(
        operation_id="audit_list",
        parameters=LIST_PARAMETERS,
        responses={200: paginated(OutputSerializer, name="AuditEventPage"), 400: ErrorSerializer},
    )
    def get(self, request: Request) -> Response:
        if not user_may_read(request.user):
            raise PermissionDenied("You may not read the audit trail.")
        form = _filters(request)
        events = event_list(user=request.user, filters=form.cleaned_data)
        paginator = ApiCursorPagination(
            ordering="-seq", page_size=AUDIT_PAGE_SIZE, max_page_size=AUDIT_MAX_PAGE_SIZE
        )
        page = paginator.paginate_queryset(events, request, view=self)
        opened = dict(zip((e.seq for e in page), events_data_open(page), strict=True))
        output = self.OutputSerializer(page, many=True, context={"opened": opened})
        return paginator.get_paginated_response(output.data)


class AuditVerifyApi(APIView):
    """GET /api/audit/verify/: recompute the whole chain; reports the first broken seq."""

    @extend_schema_serializer(component_name="AuditVerifyResult")
    class OutputSerializer(serializers.Serializer):
        ok = serializers.BooleanField()
        count = serializers.IntegerField()
        first_seq = serializers.IntegerField(allow_null=True)
        last_seq = serializers.IntegerField(allow_null=True)
        head_hash = serializers.CharField()
        broken_seq = serializers.IntegerField(allow_null=True)
        reason = serializers.CharField()

    @extend_schema(operation_id="audit_verify", responses={200: OutputSerializer})
    def get(self, request: Request) -> Response:
        if not user_sees_all(request.user):
            raise PermissionDenied("Only compliance and admins may verify the audit trail.")
        return Response(self.OutputSerializer(chain_verify_db().as_dict()).data)


class _AnyContent(BaseContentNegotiation):
    """Exports answer with their own file type whatever the client's Accept header says."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type

    def select_parser(self, request, parsers):
        return parsers[0] if parsers else None


class _AuditExportApi(APIView):
    export_format: str = ""
    content_negotiation_class = _AnyContent
    renderer_classes = [JSONRenderer]
    # No HEAD: it would start an export whose body nobody reads, so its manifest would stay
    # "streaming" for good.
    http_method_names = ["get", "options"]

    def get(self, request: Request) -> StreamingHttpResponse:
        if not user_sees_all(request.user):
            raise PermissionDenied("Only compliance and admins may export the audit trail.")
        # Every filter is validated before the manifest exists: a refused request leaves none.
        form = _filters(request)
        opened = _OPEN_VALUES.get(request.query_params.get("open", "").strip().lower())
        if opened is None:
            raise ValidationError({"open": "Use 1 (open the sealed values) or 0."})
        events = event_list(user=request.user, filters=form.cleaned_data)
        export = export_start(
            user=request.user,
            format=self.export_format,
            filters=form.filters(),
            opened=opened,
            request=request,
        )
        response = StreamingHttpResponse(
            export_stream(export=export, events=events),
            content_type=CONTENT_TYPES[self.export_format],
        )
        response["Content-Disposition"] = f'attachment; filename="{export_filename(export)}"'
        response["X-Audit-Export-Id"] = str(export.pk)
        response["Cache-Control"] = "no-store"
        return response


def _export_schema(export_format: str, operation_id: str):
    """The export's own file type for 200; refusals are JSON errors (console.schema)."""
    media_type = CONTENT_TYPES[export_format].split(";")[0]
    return extend_schema(
        operation_id=operation_id,
        parameters=[*FILTER_PARAMETERS, OPEN_PARAMETER],
        responses={
            (200, media_type): OpenApiTypes.BINARY,
            (400, "application/json"): ErrorSerializer,
            (403, "application/json"): ErrorSerializer,
        },
    )


class AuditExportCsvApi(_AuditExportApi):
    """GET /api/audit/export.csv: the filtered events as CSV, streamed and audited."""

    export_format = AuditExport.Format.CSV

    @_export_schema(AuditExport.Format.CSV, "audit_export_csv")
    def get(self, request: Request) -> StreamingHttpResponse:
        return super().get(request)


class AuditExportJsonlApi(_AuditExportApi):
    """GET /api/audit/export.jsonl: the filtered events as verifiable JSONL, streamed and audited."""

    export_format = AuditExport.Format.JSONL

    @_export_schema(AuditExport.Format.JSONL, "audit_export_jsonl")
    def get(self, request: Request) -> StreamingHttpResponse:
        return super().get(request)
