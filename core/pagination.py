"""Pagination without OFFSET or COUNT(*): keyset pages for the console pages, and the API's
one cursor pagination."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import FieldDoesNotExist, ValidationError
from django.db import models
from django.db.models import Q, QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import exceptions
from rest_framework.pagination import Cursor, CursorPagination

PAGE_SIZE = 25
# Largest value a (big)integer column holds: a forged cursor beyond it is refused, not sent.
_MAX_BIGINT = 2**63 - 1


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_cursor: str | None
    is_first: bool


def cursor_datetime(text: str) -> dt.datetime | None:
    """The datetime of a cursor, or None unless it is one our cursors hold: the database
    gives UTC, so any other offset is forged. (Postgres refuses offsets beyond +-15:59 and
    SQLite's adapter converts to UTC first, which overflows at the ends of years 1..9999.)"""
    value = parse_datetime(text)
    if value is None:
        return None
    if timezone.is_naive(value):
        try:
            value = timezone.make_aware(value)
        except (OverflowError, ValueError):
            return None
    return value if value.utcoffset() == dt.timedelta(0) else None


def cursor_encode(values: list[Any]) -> str:
    raw = json.dumps([v.isoformat() if hasattr(v, "isoformat") else str(v) for v in values])
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def cursor_decode(cursor: str, *, size: int) -> list[str] | None:
    """The values of an opaque cursor, or None when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        values = json.loads(raw)
    except (binascii.Error, ValueError):
        return None
    if (
        not isinstance(values, list)
        or len(values) != size
        or not all(isinstance(v, str) for v in values)
    ):
        return None
    if cursor_datetime(values[0]) is None:
        return None
    return values


def keyset_page(
    qs: QuerySet,
    *,
    cursor: str | None,
    fields: tuple[str, str],
    descending: bool = False,
    size: int = PAGE_SIZE,
) -> Page:
    """One page after ``cursor`` on (datetime field, id): no OFFSET and no COUNT(*)."""
    first, second = fields
    op = "lt" if descending else "gt"
    values = cursor_decode(cursor, size=2) if cursor else None
    if values:
        when = cursor_datetime(values[0])
        try:
            qs = qs.filter(
                Q(**{f"{first}__{op}": when}) | Q(**{first: when, f"{second}__{op}": values[1]})
            )
        except (ValueError, TypeError, ValidationError):
            values = None  # a cursor we did not write: start at the first page
    prefix = "-" if descending else ""
    rows = list(qs.order_by(f"{prefix}{first}", f"{prefix}{second}")[: size + 1])
    has_more = len(rows) > size
    rows = rows[:size]
    next_cursor = (
        cursor_encode([getattr(rows[-1], first), getattr(rows[-1], second)]) if has_more else None
    )
    return Page(items=rows, next_cursor=next_cursor, is_first=not values)


class ApiCursorPagination(CursorPagination):
    """The API's cursor pagination: ``?cursor=`` and a bounded ``?page_size=``, one ordering
    per list (``ApiCursorPagination(ordering=("-created_at", "-id"))``)."""

    page_size = PAGE_SIZE
    page_size_query_param = "page_size"
    max_page_size = 100

    def __init__(
        self,
        *,
        ordering: str | tuple[str, ...],
        page_size: int | None = None,
        max_page_size: int | None = None,
    ):
        self.ordering = ordering
        if page_size is not None:
            self.page_size = page_size
        if max_page_size is not None:
            self.max_page_size = max_page_size

    def get_page_size(self, request) -> int:
        """``?page_size=`` from 1 to ``max_page_size``; anything else is a 400 naming it
        (DRF would silently use the default instead of what the schema documents)."""
        raw = request.query_params.get(self.page_size_query_param)
        if raw is None or raw == "":
            return self.page_size
        # Length first: int() of a few thousand digits is itself an error.
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 6) or not (
            1 <= int(raw) <= self.max_page_size
        ):
            raise exceptions.ValidationError(
                {"page_size": f"must be an integer from 1 to {self.max_page_size}"}
            )
        return int(raw)

    def paginate_queryset(self, queryset, request, view=None):
        self._model = queryset.model
        return super().paginate_queryset(queryset, request, view)

    def decode_cursor(self, request) -> Cursor | None:
        """DRF's cursor, refused with a 400 naming ``cursor`` when it is not one we wrote: a
        forged position would otherwise reach the database as a value of the wrong type."""
        try:
            cursor = super().decode_cursor(request)
        except exceptions.NotFound:
            raise _invalid_cursor() from None
        if cursor is not None and cursor.position is not None:
            first = self.ordering[0] if isinstance(self.ordering, (list, tuple)) else self.ordering
            if not _position_valid(self._model, first.lstrip("-"), cursor.position):
                raise _invalid_cursor()
        return cursor


def _invalid_cursor() -> exceptions.ValidationError:
    return exceptions.ValidationError({"cursor": "Invalid cursor."})


def _position_valid(model: type[models.Model], name: str, position: str) -> bool:
    """Whether ``position`` is a value of the ordering column ``name`` (as our cursors hold)."""
    if "\x00" in position:
        return False
    try:
        field = model._meta.get_field(name)
    except FieldDoesNotExist:
        return False
    try:
        value = field.to_python(position)
    except (ValidationError, ValueError, TypeError, OverflowError):
        return False
    if isinstance(field, models.DateTimeField):
        return cursor_datetime(position) is not None
    if isinstance(value, int):
        return -_MAX_BIGINT - 1 <= value <= _MAX_BIGINT
    return True
