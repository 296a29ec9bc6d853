"""Forms of the reviewer pages: queue filters, decisions, and the edit form built from a schema."""

from __future__ import annotations

from typing import Any

from django import forms

from approvals.models import RiskTier
from approvals.policy import DEFAULT_TIERS
from approvals.schema_form import schema_errors_attach, schema_fields

SCOPE_MINE = "mine"
SCOPE_ALL = "all"
SCOPE_ASSIGNED = "assigned"


def _tier_names() -> list[str]:
    """The tiers that exist (RiskTier rows, by level); the code defaults while there are none."""
    names = list(RiskTier.objects.order_by("level").values_list("name", flat=True))
    return names or list(DEFAULT_TIERS)


class QueueFilterForm(forms.Form):
    """Filters of the queue. Invalid values fall back to "no filter" rather than an error page."""

    q = forms.CharField(label="Search", required=False, max_length=100)
    tier = forms.ChoiceField(label="Tier", required=False)
    agent = forms.CharField(label="Agent", required=False, max_length=100)
    tool = forms.CharField(label="Tool", required=False, max_length=100)
    scope = forms.ChoiceField(
        label="Show",
        required=False,
        choices=[
            (SCOPE_MINE, "I may decide"),
            (SCOPE_ALL, "All pending"),
            (SCOPE_ASSIGNED, "Assigned to me"),
        ],
    )

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["tier"].choices = [("", "Any tier")] + [(t, t) for t in _tier_names()]
        self.fields["q"].widget.attrs.update(
            {"type": "search", "placeholder": "tool, agent, person"}
        )

    def filters(self) -> dict[str, Any]:
        """Keyword arguments for approval_list_pending (empty values dropped)."""
        data = self.cleaned_data if self.is_valid() else {}
        return {
            "tier": data.get("tier") or None,
            "agent": (data.get("agent") or "").strip() or None,
            "tool": (data.get("tool") or "").strip() or None,
            "q": (data.get("q") or "").strip() or None,
            "mine": data.get("scope", SCOPE_MINE) != SCOPE_ALL,
            "assigned": data.get("scope") == SCOPE_ASSIGNED,
        }


class MessageForm(forms.Form):
    message = forms.CharField(
        label="Message", required=False, max_length=4000, widget=forms.Textarea(attrs={"rows": 3})
    )


# --- the edit form, generated from the tool's JSON schema (approvals/schema_form.py) ----------


class ArgsEditForm(forms.Form):
    """One input per property of the args schema. Values are checked again by the schema
    validator the decision service uses, so the page and the service agree on every rule."""

    def __init__(
        self,
        *args: Any,
        schema: dict[str, Any],
        proposed: dict[str, Any],
        **kwargs: Any,
    ):
        kwargs.setdefault("prefix", "args")
        kwargs.setdefault("initial", proposed)
        super().__init__(*args, **kwargs)
        self.schema = schema or {}
        self.proposed = proposed
        fields, self.nullable = schema_fields(self.schema, proposed, extra=True)
        self.fields.update(fields)

    def args(self) -> dict[str, Any]:
        """The edited args from cleaned_data (call after is_valid)."""
        result: dict[str, Any] = {}
        for name, field in self.fields.items():
            value = self.cleaned_data.get(name)
            if isinstance(field, forms.BooleanField):
                result[name] = bool(value)
                continue
            if value in (None, ""):
                if field.required:
                    continue  # already an error
                if name in self.proposed and self.nullable.get(name):
                    result[name] = None
                continue
            result[name] = value
        return result

    def add_schema_errors(self, errors: dict[str, str]) -> None:
        """Attach service errors ("args.<field>" -> message) to their fields."""
        schema_errors_attach(self, errors, prefix="args")
