"""Reads of the audit trail, and who may read what."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from django.db.models import BigIntegerField, F, Q, QuerySet, Value
from django.utils import timezone

from audit.models import AuditEvent, AuditExport


def user_sees_all(user: Any) -> bool:
    """Admins and the compliance group (audit.view_audit) read and export everything."""
    return bool(user.is_active and (user.is_superuser or user.has_perm("audit.view_audit")))


def user_may_read(user: Any) -> bool:
    """The audit trail carries run data (inputs, payloads, tracebacks): compliance and admins
    only. A run's own history is on its page, for those who may see the run."""
    return bool(user.is_authenticated and user_sees_all(user))


def event_list_visible(*, user: Any) -> QuerySet[AuditEvent]:
    return AuditEvent.objects.all() if user_may_read(user) else AuditEvent.objects.none()


def _day_start(day: dt.date) -> dt.datetime:
    return timezone.make_aware(dt.datetime.combine(day, dt.time.min))


def event_filter(queryset: QuerySet[AuditEvent], *, filters: Mapping[str, Any]) -> QuerySet:
    """Apply AuditFilterForm's cleaned data; days are whole days in the console's time zone."""
    if filters.get("date_from"):
        queryset = queryset.filter(at__gte=_day_start(filters["date_from"]))
    if filters.get("date_to"):
        queryset = queryset.filter(at__lt=_day_start(filters["date_to"] + dt.timedelta(days=1)))
    actor = (filters.get("actor") or "").strip()
    if actor:
        queryset = queryset.filter(Q(actor_username__iexact=actor) | Q(actor__icontains=actor))
    action = (filters.get("action") or "").strip()
    if action.endswith("*"):
        queryset = queryset.filter(action__startswith=action[:-1])
    elif action:
        queryset = queryset.filter(action=action)
    if filters.get("run"):
        queryset = queryset.filter(run_id=filters["run"])
    if filters.get("approval"):
        queryset = queryset.filter(approval_id=filters["approval"])
    tool = (filters.get("tool") or "").strip()
    if tool:
        queryset = queryset.filter(tool=tool)
    return queryset


def event_list(*, user: Any, filters: Mapping[str, Any] | None = None) -> QuerySet[AuditEvent]:
    """What this user may see, filtered as on screen, newest first."""
    return event_filter(event_list_visible(user=user), filters=filters or {}).order_by("-seq")


# A date range of at most this many days is read by its own rows (docs/benchmarks.md, Pages).
SHORT_RANGE_DAYS = 7


def _short_range(filters: Mapping[str, Any]) -> bool:
    start, end = filters.get("date_from"), filters.get("date_to")
    return bool(start and end and (end - start).days < SHORT_RANGE_DAYS)


def event_list_page(
    *, user: Any, filters: Mapping[str, Any] | None = None, before: int | None, limit: int
) -> list[AuditEvent]:
    """The first ``limit`` rows of event_list below seq ``before``, in one query.

    With a short date range the newest seqs are taken from the range's own rows, ordered by
    ``seq + 0`` (the same order, but one no index holds), then those rows by seq: Postgres then
    reads the range by the at index, or only the (tool, at, seq) index for a tool (migration
    0007), and sorts the seqs of a few days, however long the chain. Ordered by seq itself it
    walks the seq index back from the head expecting matches soon, and for an old day reads
    every row after it (10M rows, 4-6 s at 20M): seq and at grow together, which its
    estimate cannot know."""
    filters = filters or {}
    queryset = event_list(user=user, filters=filters)
    if before is not None:
        queryset = queryset.filter(seq__lt=before)
    if not _short_range(filters):
        return list(queryset[:limit])
    newest = queryset.order_by((F("seq") + Value(0, output_field=BigIntegerField())).desc())
    return list(AuditEvent.objects.filter(seq__in=newest.values("seq")[:limit]).order_by("-seq"))


def event_get_visible(*, user: Any, seq: int) -> AuditEvent | None:
    return event_list_visible(user=user).filter(seq=seq).first()


def export_list() -> QuerySet[AuditExport]:
    return AuditExport.objects.select_related("created_by").order_by("-created_at", "-id")
