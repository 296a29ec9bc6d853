"""Read-only admin: audit rows and export manifests can be looked at, never changed here."""

from __future__ import annotations

import json

from django.contrib import admin
from django.utils.html import format_html

from audit.models import AuditEvent, AuditExport
from audit.private import event_data_open


class _ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(_ReadOnlyAdmin):
    list_display = ("seq", "at", "actor", "action", "run_id", "approval_id", "tool")
    list_filter = ("action",)
    search_fields = ("actor", "actor_username", "action", "tool")
    ordering = ("-seq",)
    show_full_result_count = False
    readonly_fields = ("opened_data",)

    @admin.display(description="Data (opened)")
    def opened_data(self, event: AuditEvent) -> str:
        """The record as a reader sees it: sealed keys opened, or "erased"."""
        text = json.dumps(event_data_open(event), indent=2, sort_keys=True, ensure_ascii=False)
        return format_html("<pre>{}</pre>", text)


@admin.register(AuditExport)
class AuditExportAdmin(_ReadOnlyAdmin):
    list_display = ("id", "created_at", "created_by_label", "format", "status", "row_count")
    ordering = ("-created_at",)
