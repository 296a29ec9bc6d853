"""Filters of the decision context (templates/approvals/_if_nobody.html and friends)."""

from __future__ import annotations

import datetime as dt

from django import template
from django.utils import timezone
from django.utils.dateformat import format as date_format

register = template.Library()


@register.filter
def clock(value: dt.datetime | None) -> str:
    """08:05 UTC today, 2025-03-02 08:05 UTC on another day (in the page's time zone)."""
    if value is None:
        return ""
    local = timezone.localtime(value)
    same_day = local.date() == timezone.localdate()
    return date_format(local, "H:i T" if same_day else "Y-m-d H:i T")
