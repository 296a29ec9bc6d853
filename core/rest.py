"""What every REST API here shares: the error body and the schema of a cursor-paginated list."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response


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
