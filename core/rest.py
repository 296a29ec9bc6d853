"""What every REST API here shares: the error body and the schema of a cursor-paginated list."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from core.json_limits import MAX_JSON_DEPTH, json_problem


class ErrorSerializer(serializers.Serializer):
    """The one error body of the API (400, 403, 404, 409, 422)."""

    detail = serializers.CharField()
    errors = serializers.DictField(child=serializers.CharField())


def error_response(
    *, status_code: int, detail: str, errors: dict[str, str] | None = None, **extra: Any
) -> Response:
    return Response({"detail": detail, "errors": errors or {}, **extra}, status=status_code)


def paginated(serializer: type[serializers.Serializer], *, name: str) -> serializers.Serializer:
    """Schema of a cursor-paginated list of ``serializer``."""
    return inline_serializer(
        name=name,
        fields={
            "next": serializers.URLField(allow_null=True),
            "previous": serializers.URLField(allow_null=True),
            "results": serializer(many=True),
        },
    )


def blank_or(schema: dict[str, Any]) -> dict[str, Any]:
    """A query parameter's schema that also admits the empty value (``?run=``), which the
    filters read as "no filter", as HTML forms send it."""
    return {"oneOf": [schema, {"type": "string", "maxLength": 0}]}


def page_parameters(*, max_page_size: int = 100, default: int = 25) -> list[OpenApiParameter]:
    """``cursor`` and ``page_size`` of a list paginated by core.pagination.ApiCursorPagination."""
    return [
        OpenApiParameter("cursor", str, description="From the previous answer's next/previous."),
        OpenApiParameter(
            "page_size",
            blank_or({"type": "integer", "minimum": 1, "maximum": max_page_size}),
            description=f"1 to {max_page_size} (default {default}).",
        ),
    ]


class BodyJSONField(serializers.JSONField):
    """DRF's JSONField under the body's limits (core.json_limits). A form-encoded or multipart
    body carries the value as JSON text that DRF parses here, where SafeJSONParser never looks:
    a lone surrogate or a value nested a few hundred levels deep reached the walkers (500)."""

    def to_internal_value(self, data: Any) -> Any:
        try:
            value = super().to_internal_value(data)
        except RecursionError:
            raise serializers.ValidationError("JSON nested too deeply") from None
        # One level less than a JSON body allows: there the field is itself a level deep.
        problem = json_problem(value, max_depth=MAX_JSON_DEPTH - 1)
        if problem is not None:
            where = f"{problem.path}: " if problem.path else ""
            raise serializers.ValidationError(f"{where}{problem.message}")
        return value
