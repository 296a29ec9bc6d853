from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.db import models, transaction

from approvals.admin_forms import RiskTierAdminForm, ToolPolicyAdminForm, ToolPolicyRuleFormSet
from approvals.autonomy_admin import AutonomyRuleAdmin  # noqa: F401 (registers its admin)
from approvals.canary_admin import CanaryPlanAdmin  # noqa: F401 (registers canary plans)
from approvals.link_admin import WebhookEndpointAdminForm  # registers the links' admin too
from approvals.models import (
    AgentRun,
    ApprovalRequest,
    ApprovalVote,
    Notification,
    PolicyVersion,
    RiskTier,
    StuckItem,
    ToolPolicy,
    ToolPolicyRule,
    WebhookEndpoint,
)
from approvals.notifications import (
    notification_retry,
    webhook_endpoint_change_record,
    webhook_endpoint_secret_rotate,
)
from approvals.services import policy_change_record, policy_object_delete
from core.sealed_fields import SealedJSONField, SealedTextField
from core.sealing import is_erased, sealed_label


def _opened(name: str) -> Any:
    """A read-only display of a sealed field: its opened value, or "erased"."""

    @admin.display(description=name.replace("_", " "))
    def display(model_admin: admin.ModelAdmin, obj: Any) -> str:
        value = getattr(obj, name)
        if is_erased(value):
            return sealed_label(value)
        if value is None or isinstance(value, str):
            return value if value is not None else "-"
        return json.dumps(value, ensure_ascii=False)

    return display


def sealed_readonly(model: Any) -> Any:
    """A class decorator: the admin shows every field of ``model`` read-only, the sealed ones
    through ``<name>_opened`` (Django's display would show an erased value as empty), never
    as an editable box (excluded from the form)."""

    def decorate(cls: Any) -> Any:
        names, sealed = [], []
        for field in model._meta.fields:
            if _is_sealed(field):
                setattr(cls, f"{field.name}_opened", _opened(field.name))
                names.append(f"{field.name}_opened")
                sealed.append(field.name)
            else:
                names.append(field.name)
        cls.readonly_fields = names
        cls.exclude = tuple(sealed)
        return cls

    return decorate


def _is_sealed(field: Any) -> bool:
    return isinstance(field, (SealedJSONField, SealedTextField))


class ApprovalInline(admin.TabularInline):
    model = ApprovalRequest
    extra = 0
    can_delete = False
    fields = ("tool", "tier", "status", "decided_by_label", "decided_at", "expires_at")
    readonly_fields = fields
    show_change_link = True


@admin.register(AgentRun)
@sealed_readonly(AgentRun)
class AgentRunAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "agent",
        "graph_version",
        "status",
        "requested_by",
        "resume_count",
        "failure_count",
        "created_at",
    )
    list_filter = ("status", "agent")
    search_fields = ("id", "thread_id", "agent", "requested_by__username")
    inlines = [ApprovalInline]


@admin.register(ApprovalRequest)
@sealed_readonly(ApprovalRequest)
class ApprovalRequestAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "tool",
        "tier",
        "status",
        "run",
        "decided_by_label",
        "expires_at",
        "escalated_at",
        "policy_version",
    )
    list_filter = ("status", "tier", "tool")
    search_fields = ("tool", "run__id", "decided_by_label")

    def has_add_permission(self, request):
        return False


# --- policy (every save or delete is audited and bumps the policy version) ---------------------


class PolicyAdminMixin:
    """Saves go through the policy services: audited "policy.changed", version bumped.

    The audit runs in ``save_related`` so it records the state with groups and rules saved;
    the admin wraps the whole change in one transaction.
    """

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        policy_change_record(
            obj=form.instance,
            change="changed" if change else "created",
            actor=request.user,
            request=request,
        )

    def delete_model(self, request, obj):
        policy_object_delete(obj=obj, actor=request.user, request=request)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            policy_object_delete(obj=obj, actor=request.user, request=request)


@admin.register(RiskTier)
class RiskTierAdmin(PolicyAdminMixin, admin.ModelAdmin):
    form = RiskTierAdminForm
    list_display = (
        "name",
        "level",
        "requires_approval",
        "required_approvals",
        "groups",
        "required_group",
        "ttl_seconds",
        "escalate_after_seconds",
        "escalation_group",
        "expiry_decision",
    )
    list_filter = ("requires_approval", "expiry_decision", "approver_groups")
    search_fields = ("name",)
    filter_horizontal = ("approver_groups",)
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    fieldsets = (
        (None, {"fields": ("name", "level", "requires_approval", "allowed_decisions")}),
        (
            "Who may approve",
            {
                "fields": (
                    "approver_groups",
                    "required_approvals",
                    "required_group",
                    "lead_group",
                )
            },
        ),
        (
            "Time",
            {
                "fields": (
                    "ttl_seconds",
                    "remind_before_seconds",
                    "escalate_after_seconds",
                    "escalation_group",
                    "expiry_decision",
                    "stuck_after_seconds",
                )
            },
        ),
        ("Notifications", {"fields": ("email_notifications", "webhook_endpoint")}),
    )

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("approver_groups")

    @admin.display(description="approver groups")
    def groups(self, obj: RiskTier) -> str:
        return ", ".join(sorted(g.name for g in obj.approver_groups.all())) or "(approvals.decide)"


class ToolPolicyRuleInline(admin.TabularInline):
    model = ToolPolicyRule
    formset = ToolPolicyRuleFormSet
    extra = 1
    fields = ("position", "arg", "op", "value", "tier")
    ordering = ("position", "id")


@admin.register(ToolPolicy)
class ToolPolicyAdmin(PolicyAdminMixin, admin.ModelAdmin):
    form = ToolPolicyAdminForm
    list_display = ("tool", "tier", "rule_summary", "note")
    list_filter = ("tier",)
    search_fields = ("tool", "note")
    inlines = [ToolPolicyRuleInline]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("tier").prefetch_related("rules__tier")

    @admin.display(description="rules (in order, first match wins)")
    def rule_summary(self, obj: ToolPolicy) -> str:
        return "; ".join(str(rule) for rule in obj.rules.all()) or "-"


@admin.register(PolicyVersion)
class PolicyVersionAdmin(admin.ModelAdmin):
    list_display = ("number", "updated_at")
    readonly_fields = ("number", "updated_at")

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(ApprovalVote)
@sealed_readonly(ApprovalVote)
class ApprovalVoteAdmin(admin.ModelAdmin):
    list_display = ("approval", "user", "round", "decision", "created_at")
    list_filter = ("decision",)
    search_fields = ("user__username", "approval__tool")

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(admin.ModelAdmin):
    form = WebhookEndpointAdminForm
    list_display = ("name", "kind", "url", "is_active", "created_at")
    list_filter = ("is_active", "kind")
    search_fields = ("name", "url")
    fields = ("name", "url", "is_active", "kind", "slack_signing_secret", "secret", "created_at")
    # Generated, never typed: rotate it with the action (the receiver needs the new one).
    readonly_fields = ("secret", "created_at")
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    actions = ["rotate_secret"]

    def get_fields(self, request, obj=None):
        # The secret forges signatures: shown to those who may change the endpoint only.
        fields = super().get_fields(request, obj)
        if self.has_change_permission(request, obj):
            return fields
        return [name for name in fields if name not in ("secret", "slack_signing_secret")]

    # Every change is audited (webhook_endpoint.changed), in the admin's transaction.
    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        webhook_endpoint_change_record(
            endpoint=obj,
            change="changed" if change else "created",
            actor=request.user,
            request=request,
        )

    def delete_model(self, request, obj):
        with transaction.atomic():
            webhook_endpoint_change_record(
                endpoint=obj, change="deleted", actor=request.user, request=request
            )
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for endpoint in queryset:
            self.delete_model(request, endpoint)

    @admin.action(description="Rotate the signing secret", permissions=["change"])
    def rotate_secret(self, request, queryset):
        for endpoint in queryset:
            webhook_endpoint_secret_rotate(endpoint=endpoint, actor=request.user, request=request)
        self.message_user(request, "New secrets generated: give them to the receivers.")


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "event",
        "channel",
        "recipient",
        "status",
        "attempts",
        "next_attempt_at",
        "short_error",
        "created_at",
    )
    list_filter = ("status", "channel", "event")
    search_fields = ("recipient", "subject", "last_error")
    readonly_fields = [f.name for f in Notification._meta.fields]
    actions = ["retry"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="last error")
    def short_error(self, obj: Notification) -> str:
        return obj.last_error[:80]

    @admin.action(description="Retry now (reset attempts)")
    def retry(self, request, queryset):
        for pk in queryset.values_list("pk", flat=True):
            notification_retry(notification_id=pk)
        self.message_user(request, "Queued for another delivery.")


@admin.register(StuckItem)
class StuckItemAdmin(admin.ModelAdmin):
    """Raised and cleared by the sweep only (approvals/services/stuck.py): read-only here."""

    list_display = ("kind", "key", "raised_at", "cleared_at", "detail")
    list_filter = ("kind", ("cleared_at", admin.EmptyFieldListFilter))
    search_fields = ("key", "detail")
    readonly_fields = [f.name for f in StuckItem._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
