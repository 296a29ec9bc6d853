"""Admin for the effects ledger, the sandbox systems (labelled as sandboxes) and checkpoint
retention policies."""

from django.contrib import admin

from agents.forms import RetentionPolicyAdminForm
from agents.models import (
    Effect,
    SandboxDeploy,
    SandboxInventoryMovement,
    SandboxNotification,
    SandboxPayment,
    SandboxTicket,
)
from agents.retention_models import RetentionPolicy
from agents.runtime.retention import retention_policy_delete, retention_policy_save
from approvals.admin import sealed_readonly


@admin.register(Effect)
@sealed_readonly(Effect)  # args, result and error shown opened, or "erased", never the envelope
class EffectAdmin(admin.ModelAdmin):
    list_display = ("key", "tool", "status", "run", "attempts", "created_at")
    list_filter = ("status", "tool")
    search_fields = ("key", "tool", "run__id")

    # The ledger is append-only (the database refuses deletes too): read it, never edit it.
    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class SandboxAdmin(admin.ModelAdmin):
    readonly_fields = ("idempotency_key", "created_at")
    search_fields = ("idempotency_key",)


for model, columns in [
    (SandboxTicket, ("id", "title", "service", "severity", "status", "created_at")),
    (SandboxDeploy, ("service", "version", "previous_version", "is_rollback", "deployed_at")),
    (SandboxPayment, ("order_id", "kind", "amount", "currency", "created_at")),
    (SandboxInventoryMovement, ("sku", "delta", "reason", "created_at")),
    (SandboxNotification, ("channel", "recipient", "created_at")),
]:
    admin.site.register(
        model, type(f"{model.__name__}Admin", (SandboxAdmin,), {"list_display": columns})
    )


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin):
    """Every save and delete goes through the retention services: audited."""

    form = RetentionPolicyAdminForm
    list_display = ("agent", "keep_days", "action", "updated_at")
    list_filter = ("action",)
    search_fields = ("agent",)

    def save_model(self, request, obj, form, change):
        retention_policy_save(policy=obj, actor=request.user, created=not change, request=request)

    def delete_model(self, request, obj):
        retention_policy_delete(policy=obj, actor=request.user, request=request)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            retention_policy_delete(policy=obj, actor=request.user, request=request)


# External agents (agents/remote/) register their own admin.
import agents.remote.admin  # noqa: E402, F401
import agents.remote.connector_admin  # noqa: E402, F401
