"""Admin for Agent Server connectors: every save and delete goes through the audited services;
the API key is write-only (never shown back) and never follows a changed URL; a URL with a
user name or password is refused; "Poll now" runs one pass at once."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import admin, messages

from agents.remote.connector import connector_poll
from agents.remote.connector_models import AgentServerConnector
from agents.remote.connector_registry import connector_delete, connector_save
from agents.remote.connector_resume import public_url


class AgentServerConnectorForm(forms.ModelForm):
    url = forms.URLField(
        label="Deployment URL",
        max_length=500,
        assume_scheme="https",
        help_text="The deployment's URL (its API root).",
    )
    api_key = forms.CharField(
        label="API key",
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text="Sent as x-api-key. Leave empty to keep the current key.",
    )
    clear_api_key = forms.BooleanField(label="Remove the API key", required=False)

    class Meta:
        model = AgentServerConnector
        fields = ("name", "url", "graph_ids", "agent", "is_active", "max_threads")

    def clean_url(self) -> str:
        url = self.cleaned_data["url"]
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None:
            raise forms.ValidationError(
                "Put no user name or password in the URL (it is shown on every run of this "
                "agent): give the deployment's key in the API key field."
            )
        return url

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        moved = self.instance.pk is not None and cleaned.get("url") not in (None, self._stored_url)
        keep_key = self._stored_key and not cleaned.get("api_key")
        if moved and keep_key and not cleaned.get("clear_api_key"):
            # The stored key was given for the old URL: it must not follow to another host.
            self.add_error(
                "api_key",
                'The URL changed: enter the API key for the new URL, or tick "Remove the API key".',
            )
        return cleaned

    def clean_graph_ids(self) -> list[str]:
        value = self.cleaned_data.get("graph_ids")
        if not isinstance(value, list) or not value:
            raise forms.ValidationError('A JSON list of graph ids, e.g. ["agent"].')
        if not all(isinstance(item, str) and item.strip() for item in value):
            raise forms.ValidationError("Each graph id is a non-empty string.")
        return [item.strip() for item in value]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The admin builds the form with every field shown, so the empty key field would
        # overwrite the stored key: keep it unless a new one is typed or removal is asked.
        self._stored_key = self.instance.api_key
        self._stored_url = self.instance.url

    def save(self, commit: bool = True) -> AgentServerConnector:
        connector = super().save(commit=False)
        if self.cleaned_data.get("clear_api_key"):
            connector.api_key = ""
        else:
            connector.api_key = self.cleaned_data.get("api_key") or self._stored_key
        if commit:
            connector.save()
        return connector


@admin.register(AgentServerConnector)
class AgentServerConnectorAdmin(admin.ModelAdmin):
    form = AgentServerConnectorForm
    list_display = ("name", "deployment", "agent", "is_active", "last_polled_at", "has_error")
    list_filter = ("is_active",)
    search_fields = ("name", "url", "agent__name")
    readonly_fields = ("last_polled_at", "last_error", "created_at")
    actions = ("poll_now",)

    @admin.display(description="Deployment URL", ordering="url")
    def deployment(self, obj: AgentServerConnector) -> str:
        return public_url(obj.url)

    @admin.display(boolean=True, description="Error")
    def has_error(self, obj: AgentServerConnector) -> bool:
        return bool(obj.last_error)

    def save_model(self, request: Any, obj: Any, form: Any, change: bool) -> None:
        connector_save(connector=obj, actor=request.user, request=request)

    def delete_model(self, request: Any, obj: Any) -> None:
        connector_delete(connector=obj, actor=request.user, request=request)

    def delete_queryset(self, request: Any, queryset: Any) -> None:
        for obj in queryset:
            connector_delete(connector=obj, actor=request.user, request=request)

    @admin.action(description="Poll now: open requests, resume decided threads")
    def poll_now(self, request: Any, queryset: Any) -> None:
        for connector in queryset.select_related("agent"):
            counts = connector_poll(connector=connector)
            level = messages.WARNING if counts["errors"] else messages.INFO
            self.message_user(request, f"{connector.name}: {counts}", level=level)
