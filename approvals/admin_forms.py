"""Admin forms of the policy: what an administrator saves cannot weaken the record.

A tool policy must name a tool the code registered (a typo would leave the real tool on its
code default tier), and a tier's allowed decisions are chosen from the known ones (an unknown
value such as "approv" used to leave a tier on which nobody could decide anything).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.conf import settings
from django.utils.module_loading import import_string

from approvals.models import RiskTier, ToolPolicy
from approvals.policy import ALL_DECISIONS

# approvals never imports agents (DESIGN.md): the registry's names are read by dotted path,
# spelled once here; a project may point APPROVALS_TOOL_NAMES at its own function.
TOOL_NAMES = "agents.tools.registry.tool_names"
TOOL_ARG_NAMES = "agents.tools.registry.tool_arg_names"


def registered_tool_names() -> list[str]:
    names: Callable[[], list[str]] = import_string(
        getattr(settings, "APPROVALS_TOOL_NAMES", TOOL_NAMES)
    )
    return sorted(names())


class ToolPolicyAdminForm(forms.ModelForm):
    class Meta:
        model = ToolPolicy
        fields = ("tool", "tier", "note")

    def clean_tool(self) -> str:
        tool = (self.cleaned_data.get("tool") or "").strip()
        known = registered_tool_names()
        if tool not in known:
            raise forms.ValidationError(
                f"No registered tool is named {tool!r}. Registered tools: {', '.join(known)}."
            )
        return tool


def registered_tool_arg_names(tool: str) -> list[str] | None:
    names: Callable[[str], list[str] | None] = import_string(
        getattr(settings, "APPROVALS_TOOL_ARG_NAMES", TOOL_ARG_NAMES)
    )
    return names(tool)


class ToolPolicyRuleFormSet(forms.BaseInlineFormSet):
    """A rule must name an argument of its tool: "amout > 1000 -> critical" would never
    match, leaving every large call in the policy's lower tier."""

    def clean(self) -> None:
        super().clean()
        known = registered_tool_arg_names(self.instance.tool or "")
        if known is None:
            return  # the tool field names the problem
        for form in self.forms:
            if not hasattr(form, "cleaned_data") or form.cleaned_data.get("DELETE"):
                continue
            arg = (form.cleaned_data.get("arg") or "").strip()
            if arg and arg not in known:
                form.add_error(
                    "arg",
                    f"{self.instance.tool} has no argument {arg!r}. "
                    f"Its arguments: {', '.join(known)}.",
                )


class RiskTierAdminForm(forms.ModelForm):
    allowed_decisions = forms.MultipleChoiceField(
        choices=[(decision, decision) for decision in ALL_DECISIONS],
        widget=forms.CheckboxSelectMultiple,
        help_text="The decisions a reviewer may take on this tier (at least one).",
    )

    class Meta:
        model = RiskTier
        fields = (
            "name",
            "level",
            "requires_approval",
            "allowed_decisions",
            "approver_groups",
            "required_approvals",
            "required_group",
            "lead_group",
            "ttl_seconds",
            "remind_before_seconds",
            "escalate_after_seconds",
            "escalation_group",
            "expiry_decision",
            "stuck_after_seconds",
            "email_notifications",
            "webhook_endpoint",
        )

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        # Left out of a post (an older form), the stored value or the model's default stays.
        self.fields["stuck_after_seconds"].required = False
        stored = self.instance.allowed_decisions if self.instance.pk else []
        # An empty list has always meant "every decision": show it as every box ticked.
        self.initial["allowed_decisions"] = [d for d in ALL_DECISIONS if d in stored] or list(
            ALL_DECISIONS
        )

    def clean_stuck_after_seconds(self) -> int:
        value = self.cleaned_data.get("stuck_after_seconds")
        if value is None:
            return self.instance.stuck_after_seconds
        return value

    def clean_allowed_decisions(self) -> list[str]:
        chosen = self.cleaned_data.get("allowed_decisions") or []
        return [d for d in ALL_DECISIONS if d in chosen]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        escalate_after = cleaned.get("escalate_after_seconds") or 0
        ttl = cleaned.get("ttl_seconds")
        if escalate_after and not cleaned.get("escalation_group"):
            self.add_error(
                "escalation_group", "Escalation needs a group to escalate to (or set 0 seconds)."
            )
        if escalate_after and ttl and escalate_after >= ttl:
            self.add_error(
                "escalate_after_seconds",
                "Must be shorter than the time to live, or the approval expires first.",
            )
        remind_before = cleaned.get("remind_before_seconds") or 0
        if remind_before and ttl and remind_before >= ttl:
            self.add_error("remind_before_seconds", "Must be shorter than the time to live.")
        return cleaned
