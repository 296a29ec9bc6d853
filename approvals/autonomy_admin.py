"""The admin of autonomy rules (docs/autonomy.md): which class of gated calls may run
without waiting. A rule that lets calls run unasked (sampled, post-hoc) is refused for a tool
nobody can undo, naming it; for a tier, naming every registered tool in that tier without a
compensating tool. Saves and deletes are audited and bump the policy version."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from approvals.autonomy import registered_tools, tier_tools, without_compensation
from approvals.autonomy_models import AutonomyRule
from approvals.services.autonomy_rules import (
    autonomy_rule_change_record,
    autonomy_rule_delete,
    autonomy_rule_snapshot,
)
from audit.canonical import CanonicalError, canonical_text, json_has_nul

UNASKED = (AutonomyRule.Mode.SAMPLED, AutonomyRule.Mode.POST_HOC)


class AutonomyRuleAdminForm(forms.ModelForm):
    class Meta:
        model = AutonomyRule
        fields = ("tool", "tier", "mode", "sample_percent", "confidence_below", "note", "evidence")

    def clean_evidence(self) -> dict[str, Any]:
        """An object the audit can hold verbatim: no NaN, infinity or NUL (the rule's change
        event carries it)."""
        evidence = self.cleaned_data.get("evidence")
        if evidence in (None, ""):
            return {}
        if not isinstance(evidence, dict):
            raise forms.ValidationError('Evidence is a JSON object, e.g. {} or {"volume": 60}.')
        if json_has_nul(evidence):
            raise forms.ValidationError("Evidence must not contain the NUL character (\\u0000).")
        try:
            canonical_text(evidence)
        except CanonicalError as exc:
            raise forms.ValidationError(f"Evidence is not plain JSON: {exc}") from None
        return evidence

    def clean_tool(self) -> str:
        tool = (self.cleaned_data.get("tool") or "").strip()
        known = registered_tools()
        if tool and tool not in known:
            raise forms.ValidationError(
                f"No registered tool is named {tool!r}. Registered tools: {', '.join(sorted(known))}."
            )
        return tool

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        tool, tier, mode = data.get("tool"), data.get("tier"), data.get("mode")
        if bool(tool) == bool(tier):
            raise forms.ValidationError("Name either a tool or a tier (not both).")
        if mode == AutonomyRule.Mode.SAMPLED and not data.get("sample_percent"):
            self.add_error(
                "sample_percent", "A sampled rule reviews at least 1 % (0 would review nothing)."
            )
        if mode not in UNASKED:
            return data
        if tool:
            if without_compensation([tool]):
                self.add_error(
                    "tool",
                    f"{tool} has no compensating tool: its calls cannot be undone, so they "
                    f"cannot run without waiting ({mode}). Use ask or shadow.",
                )
        else:
            lacking = without_compensation(tier_tools(tier))
            if lacking:
                self.add_error(
                    "tier",
                    f"Tier {tier.name} has tools without a compensating tool: "
                    f"{', '.join(lacking)}. Their calls cannot be undone, so the tier cannot "
                    f"run without waiting ({mode}). Give those tools their own ask rule or "
                    "tool policy first, or use ask or shadow.",
                )
        return data


@admin.register(AutonomyRule)
class AutonomyRuleAdmin(admin.ModelAdmin):
    form = AutonomyRuleAdminForm
    list_display = ("scope", "mode", "sample_percent", "confidence_below", "updated_at")
    list_filter = ("mode", "tier")
    search_fields = ("tool", "note")

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("tier")

    @admin.display(description="scope", ordering="tool")
    def scope(self, obj: AutonomyRule) -> str:
        return f"tool {obj.tool}" if obj.tool else f"tier {obj.tier.name}"

    def save_model(self, request, obj, form, change):
        before = None
        if change:
            stored = AutonomyRule.objects.select_related("tier").filter(pk=obj.pk).first()
            before = autonomy_rule_snapshot(stored) if stored else None
        super().save_model(request, obj, form, change)
        autonomy_rule_change_record(
            rule=obj,
            change="changed" if change else "created",
            before=before,
            actor=request.user,
            request=request,
        )

    def delete_model(self, request, obj):
        autonomy_rule_delete(rule=obj, actor=request.user, request=request)

    def delete_queryset(self, request, queryset):
        for obj in queryset:
            autonomy_rule_delete(rule=obj, actor=request.user, request=request)
