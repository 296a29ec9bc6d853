"""Admin of deciding from where one is: Slack endpoints' form, Slack identities (audited), and
the decision links (read-only: made by the outbox, used by their recipients)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.db import transaction

from approvals.models import DecisionLink, SlackIdentity, WebhookEndpoint
from approvals.notification_webhooks import webhook_url_validate
from audit.services import event_record


class WebhookEndpointAdminForm(forms.ModelForm):
    """The kind, and Slack's signing secret typed once and never shown again."""

    url = forms.URLField(
        max_length=500,
        assume_scheme="https",
        help_text="Receives a signed JSON POST per event.",
        validators=[webhook_url_validate],
    )
    kind = forms.ChoiceField(
        choices=WebhookEndpoint.Kind.choices,
        required=False,
        initial=WebhookEndpoint.Kind.STANDARD,
        help_text="Slack: a Block Kit message with Approve / Reject / Open buttons.",
    )
    slack_signing_secret = forms.CharField(
        required=False,
        max_length=200,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
        help_text=(
            "Slack only: the app's Signing Secret (Basic Information). Never shown again; "
            "leave blank to keep the current one."
        ),
    )

    class Meta:
        model = WebhookEndpoint
        fields = ["name", "url", "is_active", "kind", "slack_signing_secret"]

    def clean_kind(self) -> str:
        return self.cleaned_data.get("kind") or WebhookEndpoint.Kind.STANDARD

    def clean_slack_signing_secret(self) -> str:
        typed = self.cleaned_data.get("slack_signing_secret") or ""
        return typed or (self.instance.slack_signing_secret if self.instance.pk else "")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if data.get("kind") == WebhookEndpoint.Kind.SLACK and not data.get("slack_signing_secret"):
            self.add_error(
                "slack_signing_secret", "A Slack endpoint needs its app's signing secret."
            )
        return data


def slack_identity_change_record(
    *, identity: SlackIdentity, change: str, actor: Any, request: Any
) -> None:
    """Audit "slack_identity.changed": who a Slack user decides as (in the change's transaction)."""
    event_record(
        action="slack_identity.changed",
        actor=actor,
        data={
            "change": change,
            "team_id": identity.team_id,
            "slack_user_id": identity.slack_user_id,
            "user": identity.user.get_username(),
        },
        request=request,
    )


@admin.register(SlackIdentity)
class SlackIdentityAdmin(admin.ModelAdmin):
    list_display = ("team_id", "slack_user_id", "user", "created_at")
    search_fields = ("team_id", "slack_user_id", "user__username")

    def save_model(self, request, obj, form, change):
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            slack_identity_change_record(
                identity=obj,
                change="changed" if change else "created",
                actor=request.user,
                request=request,
            )

    def delete_model(self, request, obj):
        with transaction.atomic():
            slack_identity_change_record(
                identity=obj, change="deleted", actor=request.user, request=request
            )
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        for identity in queryset:
            self.delete_model(request, identity)


@admin.register(DecisionLink)
class DecisionLinkAdmin(admin.ModelAdmin):
    list_display = ("id", "approval", "recipient", "expires_at", "used_at", "used_by", "decision")
    list_filter = (("used_at", admin.EmptyFieldListFilter),)
    search_fields = ("recipient__username",)
    # The nonce's hash is not a secret, but nothing to look at either.
    readonly_fields = [f.name for f in DecisionLink._meta.fields if f.name != "nonce_hash"]
    exclude = ("nonce_hash",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
