"""Forms of the reviewer pages: queue filters, decisions, and the edit form built from a schema."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from approvals.contract import schema_ref_resolve
from approvals.models import RiskTier
from approvals.policy import DEFAULT_TIERS
from core.json_limits import json_problem

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


# --- the edit form, generated from the tool's JSON schema ------------------------------------


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(concrete schema, nullable) for one property: follows local $refs and Optional[...]."""
    nullable = False
    for _ in range(10):  # refs and unions may nest; a cycle must not hang the page
        resolved = schema_ref_resolve(schema, node, with_siblings=True)
        # A $ref that points nowhere describes nothing: keep only the keywords beside it.
        node = (
            {k: v for k, v in resolved.items() if k != "$ref"} if isinstance(resolved, dict) else {}
        )
        options = node.get("anyOf") or node.get("oneOf")
        if isinstance(options, list) and options:
            concrete = [o for o in options if isinstance(o, dict) and o.get("type") != "null"]
            nullable = nullable or len(concrete) < len(options)
            # Prefer a number branch (pydantic writes Decimal as number-or-string).
            numeric = [o for o in concrete if o.get("type") in ("number", "integer")]
            chosen = (numeric or concrete or [{}])[0]
            extra = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
            node = {**chosen, **extra}
            continue
        break
    if isinstance(node.get("type"), list):
        types = [t for t in node["type"] if t != "null"]
        nullable = nullable or len(types) < len(node["type"])
        node = {**node, "type": types[0] if types else "string"}
    return node, nullable


class JSONValueField(forms.CharField):
    """A value the form cannot express as one input (object, array): edited as JSON text."""

    widget = forms.Textarea(attrs={"rows": 4, "class": "mono"})

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, str):
            return value  # bound data, shown back as typed
        return json.dumps(value, indent=2, ensure_ascii=False) if value is not None else ""

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value)
        if text in self.empty_values:
            return None
        try:
            value = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "nested too deeply"
            raise forms.ValidationError(f"Not valid JSON: {reason}") from None
        problem = json_problem(value)
        if problem is not None:
            where = f"{problem.path}: " if problem.path else ""
            raise forms.ValidationError(f"{where}{problem.message}.")
        return value


class NumberField(forms.FloatField):
    """A JSON number: whole numbers stay integers, so an untouched 50 is not edited to 50.0."""

    def to_python(self, value: Any) -> Any:
        number = super().to_python(value)
        if number is not None and number.is_integer() and not any(c in str(value) for c in ".eE"):
            return int(number)
        return number


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
        self.nullable: dict[str, bool] = {}
        required = set(self.schema.get("required") or [])
        properties = self.schema.get("properties") or {}
        names = list(properties) + [k for k in proposed if k not in properties]
        for name in names:
            raw = properties.get(name) or _infer(proposed.get(name))
            node, nullable = _resolve(self.schema, raw)
            self.nullable[name] = nullable
            self.fields[name] = _field_for(name, node, required=name in required)

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
        for key, message in errors.items():
            name = key.removeprefix("args.").split(".")[0] if key.startswith("args.") else ""
            if name in self.fields:
                self.add_error(name, message)
            else:
                self.add_error(None, message)


def _infer(value: Any) -> dict[str, Any]:
    """A schema for an arg the payload's schema does not describe, from its proposed value."""
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, dict):
        return {"type": "object"}
    if isinstance(value, list):
        return {"type": "array"}
    return {"type": "string"}


def _field_for(name: str, node: dict[str, Any], *, required: bool) -> forms.Field:
    label = node.get("title") or name.replace("_", " ").capitalize()
    help_text = node.get("description", "")
    common = {"label": label, "help_text": help_text, "required": required}
    kind = node.get("type")
    attrs: dict[str, Any] = {}
    for key, attr in (("minimum", "min"), ("maximum", "max"), ("maxLength", "maxlength")):
        if key in node:
            attrs[attr] = node[key]
    if "enum" in node:
        values = list(node["enum"])
        lookup = {str(v): v for v in values}
        choices = [(str(v), str(v)) for v in values]
        if not required:
            choices = [("", "—")] + choices
        return forms.TypedChoiceField(
            choices=choices, coerce=lambda v: lookup.get(v, v), empty_value=None, **common
        )
    if kind == "boolean":
        # A checkbox cannot be "required" in HTML terms: unchecked means false.
        return forms.BooleanField(label=label, help_text=help_text, required=False)
    if kind == "integer":
        return forms.IntegerField(widget=forms.NumberInput(attrs=attrs), **common)
    if kind == "number":
        return NumberField(widget=forms.NumberInput(attrs={**attrs, "step": "any"}), **common)
    if kind in ("object", "array"):
        return JSONValueField(**common)
    widget: forms.Widget = forms.TextInput(attrs=attrs)
    if node.get("maxLength", 0) > 200 or node.get("format") == "textarea":
        widget = forms.Textarea(attrs={**attrs, "rows": 3})
    # strip=False: the reviewer's text reaches the tool exactly as typed.
    return forms.CharField(widget=widget, strip=False, **common)
