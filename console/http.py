"""Shared HTTP helpers."""

from __future__ import annotations

from typing import Any

from rest_framework import exceptions
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import exception_handler

from core.errors import ApplicationError


def api_exception_handler(exc: Exception, context: dict[str, Any]):
    """DRF's handler with one error shape: {"detail": "...", "errors": {"field": "msg"}}.

    A service's ApplicationError answers with its own status and ``extra()`` fields. Unknown
    errors still become 500s, which the tests treat as bugs.
    """
    if isinstance(exc, ApplicationError):
        return Response(
            {"detail": exc.message, "errors": exc.errors, **exc.extra()}, status=exc.status_code
        )
    response = exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        errors = flatten_errors(response.data)
        response.data = {"detail": _validation_detail(errors), "errors": errors}
        return response
    data = response.data
    if isinstance(data, dict) and "detail" in data:
        detail = str(data["detail"])
        errors = data.get("errors") or {}
    else:
        detail, errors = "The request failed.", flatten_errors(data)
    response.data = {"detail": detail, "errors": errors}
    return response


def flatten_errors(data: Any, prefix: str = "") -> dict[str, str]:
    """{"input.severity": "msg"} from DRF's nested error structure."""
    if isinstance(data, dict):
        flat: dict[str, str] = {}
        for key, value in data.items():
            flat.update(flatten_errors(value, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    if isinstance(data, list):
        if all(not isinstance(item, (dict, list)) for item in data):
            return {prefix or "non_field_errors": " ".join(str(item) for item in data)}
        flat = {}
        for index, item in enumerate(data):
            flat.update(flatten_errors(item, f"{prefix}.{index}" if prefix else str(index)))
        return flat
    return {prefix or "non_field_errors": str(data)}


def _validation_detail(errors: dict[str, str]) -> str:
    if not errors:
        return "Invalid input."
    field, message = next(iter(errors.items()))
    if field == "non_field_errors":
        return f"Invalid input: {message}"
    return f"Invalid input: {field}: {message}"


class SafeJSONParser(JSONParser):
    """DRF's JSON parser, answering 400 (not 500) to JSON nested too deep to parse."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None
