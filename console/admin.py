"""API tokens in the admin: who holds which, until when; an administrator may revoke (delete)."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from console.models import ApiToken
from console.tokens import token_revoke_as_admin


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("token_key", "user", "name", "created", "expiry", "last_used_at")
    list_filter = ("created", "expiry")
    search_fields = ("token_key", "name", "user__username")
    list_select_related = ("user",)
    # Only the digest is stored: nothing here can show (or set) a secret. People make tokens
    # on their own page (/account/tokens/) or with /api/auth/token/.
    fields = ("token_key", "user", "name", "created", "expiry", "last_used_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: ApiToken | None = None) -> bool:
        return False

    # Revoking is an audit event wherever it happens (docs/security.md).
    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        token_revoke_as_admin(
            tokens=ApiToken.objects.filter(pk=obj.pk), admin=request.user, request=request
        )

    def delete_queryset(self, request: HttpRequest, queryset) -> None:
        token_revoke_as_admin(tokens=queryset, admin=request.user, request=request)
