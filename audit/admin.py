"""Read-only admin: audit rows and export manifests can be looked at, never changed here."""

from __future__ import annotations

from django.contrib import admin

from audit.models import AuditEvent, AuditExport


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


@admin.register(AuditExport)
class AuditExportAdmin(_ReadOnlyAdmin):
    list_display = ("id", "created_at", "created_by_label", "format", "status", "row_count")
    ordering = ("-created_at",)
