"""Pagination without OFFSET or COUNT(*): keyset pages for the console pages, and the API's
one cursor pagination."""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ValidationError
from django.db.models import Q, QuerySet
from django.utils.dateparse import parse_datetime
from rest_framework.pagination import CursorPagination

PAGE_SIZE = 25


@dataclass(frozen=True)
class Page:
    items: list[Any]
    next_cursor: str | None
    is_first: bool


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
    if parse_datetime(values[0]) is None:
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
        when = parse_datetime(values[0])
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
