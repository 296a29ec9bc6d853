"""Canary plans in the admin: compliance (and superusers) configure them and plant one now
(docs/autonomy.md). Imported by approvals/admin.py."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction

from approvals.canary_templates import TEMPLATES, template_choices
from approvals.models import CanaryPlan
from approvals.services.canaries import (
    CanaryRefused,
    canary_plant,
    requester_problem,
)
from audit.selectors import user_sees_all
from audit.services import event_record


class CanaryPlanAdminForm(forms.ModelForm):
    templates = forms.MultipleChoiceField(
        choices=template_choices(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="None checked: every template whose tool's real calls wait in the tier.",
    )

    class Meta:
        model = CanaryPlan
        fields = ["tier", "templates", "per_day", "requested_as", "is_active"]
        help_texts = {
            "requested_as": "The user the canary runs appear to come from (never a reviewer of "
            "the tier); empty: whoever requested the most real runs of the template's agent in "
            "the last 30 days and may not decide the tier (they see these runs among theirs: "
            "prefer a service account that requests real runs).",
        }

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        tier = data.get("tier")
        requester = data.get("requested_as")
        if tier is not None and requester is not None:
            problem = requester_problem(user=requester, tier=tier.name)
            if problem:
                self.add_error("requested_as", problem)
        data["templates"] = [name for name in data.get("templates") or [] if name in TEMPLATES]
        return data


class _ComplianceOnly:
    """Compliance officers and superusers (the audit readers) manage canary plans."""

    def has_module_permission(self, request) -> bool:
        return user_sees_all(request.user)

    def has_view_permission(self, request, obj=None) -> bool:
        return user_sees_all(request.user)

    def has_add_permission(self, request) -> bool:
        return user_sees_all(request.user)

    def has_change_permission(self, request, obj=None) -> bool:
        return user_sees_all(request.user)

    def has_delete_permission(self, request, obj=None) -> bool:
        return user_sees_all(request.user)


@admin.register(CanaryPlan)
class CanaryPlanAdmin(_ComplianceOnly, admin.ModelAdmin):
    form = CanaryPlanAdminForm
    list_display = ["__str__", "tier", "per_day", "requested_as", "is_active", "created_by"]
    list_filter = ["is_active", "tier"]
    actions = ["plant_now"]

    def save_model(self, request, obj: CanaryPlan, form, change: bool) -> None:
        with transaction.atomic():
            if not change:
                obj.created_by = request.user
            super().save_model(request, obj, form, change)
            event_record(
                action="canary.plan_saved",
                actor=request.user,
                data={
                    "plan": obj.pk,
                    "tier": obj.tier.name,
                    "per_day": obj.per_day,
                    "templates": list(obj.templates),
                    "requested_as": obj.requested_as.username if obj.requested_as else "",
                    "is_active": obj.is_active,
                    "change": "changed" if change else "created",
                },
                request=request,
            )

    @admin.action(description="Plant one now")
    def plant_now(self, request, queryset) -> None:
        for plan in queryset.select_related("tier", "requested_as"):
            try:
                canary = canary_plant(plan=plan)
            except CanaryRefused as exc:
                self.message_user(request, f"Plan {plan}: {exc.message}", messages.ERROR)
                continue
            self.message_user(
                request, f"Planted a canary ({canary.template}) into tier {plan.tier.name}."
            )
