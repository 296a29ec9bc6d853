"""Admin for external agents: register one, issue a key (shown once), revoke keys, rotate the
callback secret. Every change is audited (``external_agent.changed``, never a secret)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import models

from agents.remote.models import ExternalAgent, ExternalAgentKey
from agents.remote.registry import (
    external_agent_key_issue,
    external_agent_key_revoke,
    external_agent_save,
    external_agent_secret_rotate,
)
from approvals.notification_webhooks import webhook_url_validate


class ExternalAgentForm(forms.ModelForm):
    callback_url = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text=ExternalAgent._meta.get_field("callback_url").help_text,
        validators=[webhook_url_validate],
    )

    class Meta:
        model = ExternalAgent
        fields = ("name", "owner_group", "tools", "callback_url", "is_active")

    def clean_tools(self) -> list[str]:
        tools = self.cleaned_data.get("tools") or []
        if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            raise forms.ValidationError('A JSON list of tool names, e.g. ["refund_order"].')
        return tools


class KeyInline(admin.TabularInline):
    model = ExternalAgentKey
    extra = 0
    fields = ("prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # issued by the action, which shows the key once


@admin.register(ExternalAgent)
class ExternalAgentAdmin(admin.ModelAdmin):
    form = ExternalAgentForm
    list_display = ("name", "owner_group", "is_active", "callback_url", "created_at")
    list_filter = ("is_active",)
    search_fields = ("name",)
    readonly_fields = ("user", "callback_secret", "endpoint", "created_at")
    inlines = [KeyInline]
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    actions = ["issue_key", "rotate_callback_secret"]

    def get_fields(self, request, obj=None):
        fields = ["name", "owner_group", "tools", "callback_url", "is_active"]
        if obj is not None:
            fields += ["user", "endpoint", "created_at"]
            # The secret forges callbacks: shown to those who may change the agent only.
            if self.has_change_permission(request, obj):
                fields.append("callback_secret")
        return fields

    def get_readonly_fields(self, request, obj=None):
        # The name is fixed once made: its runs are runs of "external:<name>" and their
        # thread ids carry it; a rename would hand them to the next agent of that name.
        fixed = ("name",) if obj is not None else ()
        return (*self.readonly_fields, *fixed)

    def save_model(self, request, obj, form, change):
        external_agent_save(
            agent=obj,
            actor=request.user,
            change="changed" if change else "created",
            request=request,
        )

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # its runs keep their requester: deactivate it instead

    @admin.action(description="Issue a new key", permissions=["change"])
    def issue_key(self, request, queryset):
        for agent in queryset:
            _row, key = external_agent_key_issue(agent=agent, actor=request.user, request=request)
            self.message_user(
                request,
                f"New key for {agent.name} (shown once, store it now): {key}",
                level=messages.WARNING,
            )

    @admin.action(description="Rotate the callback secret", permissions=["change"])
    def rotate_callback_secret(self, request, queryset):
        for agent in queryset:
            external_agent_secret_rotate(agent=agent, actor=request.user, request=request)
        self.message_user(request, "New callback secrets: give them to the agents.")


@admin.register(ExternalAgentKey)
class ExternalAgentKeyAdmin(admin.ModelAdmin):
    list_display = ("prefix", "agent", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("prefix", "agent__name")
    fields = ("agent", "prefix", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields
    actions = ["revoke"]

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoked, never deleted: the audit names its prefix

    @admin.action(description="Revoke the selected keys", permissions=["change"])
    def revoke(self, request, queryset: Any):
        revoked = sum(
            external_agent_key_revoke(key=key, actor=request.user, request=request)
            for key in queryset.select_related("agent")
        )
        self.message_user(request, f"{revoked} key(s) revoked.")
