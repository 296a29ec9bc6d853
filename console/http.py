"""Shared HTTP helpers."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from rest_framework import exceptions
from rest_framework.exceptions import ParseError, UnsupportedMediaType
from rest_framework.parsers import JSONParser
from rest_framework.response import Response
from rest_framework.views import exception_handler

from core.errors import ApplicationError
from core.json_limits import json_problem


def api_exception_handler(exc: Exception, context: dict[str, Any]):
    """DRF's handler with one error shape: {"detail": "...", "errors": {"field": "msg"}}.

    A service's ApplicationError answers with its own status and ``extra()`` fields. Unknown
    errors still become 500s, which the tests treat as bugs.
    """
    if isinstance(exc, ApplicationError):
        return Response(
            {"detail": exc.message, "errors": exc.errors, **exc.extra()}, status=exc.status_code
        )
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            {
                "detail": "The request body is too large.",
                "errors": {"body": f"at most {limit} bytes"},
            },
            status=413,
        )
    if isinstance(exc, (TooManyFieldsSent, TooManyFilesSent)):
        return Response(
            {"detail": f"Invalid input: body: {exc}", "errors": {"body": str(exc)}}, status=400
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
        errors = data.get("errors") or _named(exc, detail)
    else:
        detail, errors = "The request failed.", flatten_errors(data)
    response.data = {"detail": detail, "errors": errors}
    return response


def _named(exc: Exception, detail: str) -> dict[str, str]:
    """The field a body-level refusal is about, so every 4xx names one."""
    if isinstance(exc, UnsupportedMediaType):
        return {"Content-Type": detail}
    if isinstance(exc, ParseError):
        return {"body": detail}
    return {}


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
    """DRF's JSON parser, answering 400 (not 500) to JSON that the code could not walk: nested
    deeper than ``MAX_JSON_DEPTH`` or holding lone UTF-16 surrogates (core.json_limits)."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise JSONBodyRefused("body", "JSON parse error - nested too deeply") from None
        problem = json_problem(data)
        if problem is not None:
            raise JSONBodyRefused(problem.path or "body", problem.message)
        return data


class JSONBodyRefused(ParseError):
    """A body we refuse to parse, naming where: {"detail": ..., "errors": {field: message}}."""

    def __init__(self, field: str, message: str):
        super().__init__(
            {"detail": f"Invalid input: {field}: {message}", "errors": {field: message}}
        )
