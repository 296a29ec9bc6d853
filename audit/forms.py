"""The audit log's filters: one form for the page, the API and the exports."""

from __future__ import annotations

import datetime as dt
from typing import Any

from django import forms
from django.core.validators import MaxValueValidator, MinValueValidator

FILTER_FIELDS = ("date_from", "date_to", "actor", "action", "run", "approval", "tool")


# Days are turned into aware datetimes and date_to into the next day's start: outside these
# bounds that arithmetic overflows (9999-12-31 + 1 day) instead of filtering.
DATE_MIN = dt.date(1900, 1, 1)
DATE_MAX = dt.date(9998, 12, 31)
_DATE_BOUNDS = [MinValueValidator(DATE_MIN), MaxValueValidator(DATE_MAX)]
_MAX_BIGINT = 2**63 - 1


class AuditFilterForm(forms.Form):
    date_from = forms.DateField(
        required=False,
        label="From",
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=_DATE_BOUNDS,
    )
    date_to = forms.DateField(
        required=False,
        label="To",
        widget=forms.DateInput(attrs={"type": "date"}),
        validators=_DATE_BOUNDS,
    )
    actor = forms.CharField(
        required=False, max_length=200, help_text="Username, or a label such as system:timeout"
    )
    action = forms.CharField(
        required=False, max_length=80, help_text="Exact, or a prefix ending in * (approval.*)"
    )
    run = forms.UUIDField(required=False, label="Run id")
    approval = forms.IntegerField(
        required=False, min_value=1, max_value=_MAX_BIGINT, label="Approval id"
    )
    tool = forms.CharField(required=False, max_length=100)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        start, end = cleaned.get("date_from"), cleaned.get("date_to")
        if start and end and start > end:
            raise forms.ValidationError("'From' must not be after 'To'.")
        return cleaned

    def filters(self) -> dict[str, str]:
        """The non-empty filters as strings: what the manifest and export header record."""
        out: dict[str, str] = {}
        for name in FILTER_FIELDS:
            value = self.cleaned_data.get(name)
            if value in (None, ""):
                continue
            out[name] = value.isoformat() if isinstance(value, dt.date) else str(value).strip()
        return {k: v for k, v in out.items() if v}


def filter_form(data: Any) -> AuditFilterForm:
    """A bound form over the known filter keys only (other query keys such as a cursor are
    ignored)."""
    return AuditFilterForm({name: data.get(name, "") for name in FILTER_FIELDS})
