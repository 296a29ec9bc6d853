"""Form fields generated from a JSON schema: one input per property.

The approval's edit form (the tool's args schema) and the start-a-run form (the agent's input
schema) are both built here, so a schema reads the same on both pages. Values are checked
again by the service that receives them; the fields only give typed values and early errors.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms

from approvals.contract import schema_ref_resolve
from core.json_limits import json_problem


def schema_resolve(schema: dict[str, Any], node: dict[str, Any]) -> tuple[dict[str, Any], bool]:
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


def schema_infer(value: Any) -> dict[str, Any]:
    """A schema for a value the schema does not describe, from the value itself."""
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


def schema_field(name: str, node: dict[str, Any], *, required: bool) -> forms.Field:
    """The form field for one (resolved) property schema."""
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
    # strip=False: the person's text reaches the tool or the agent exactly as typed.
    return forms.CharField(widget=widget, strip=False, **common)


def schema_fields(
    schema: dict[str, Any], values: dict[str, Any], *, extra: bool
) -> tuple[dict[str, forms.Field], dict[str, bool]]:
    """({name: field}, {name: nullable}) for the schema's properties, in schema order; with
    ``extra``, also for the keys of ``values`` the schema does not describe."""
    required = set(schema.get("required") or [])
    properties = schema.get("properties") or {}
    names = list(properties)
    if extra:
        names += [k for k in values if k not in properties]
    fields: dict[str, forms.Field] = {}
    nullable: dict[str, bool] = {}
    for name in names:
        raw = properties.get(name) or schema_infer(values.get(name))
        node, nullable[name] = schema_resolve(schema, raw)
        fields[name] = schema_field(name, node, required=name in required)
    return fields, nullable


def schema_errors_attach(form: forms.Form, errors: dict[str, str], *, prefix: str) -> None:
    """Attach a service's errors ("<prefix>.<field>[.<more>]" -> message) to their fields;
    the rest go above the form."""
    for key, message in errors.items():
        name = key.removeprefix(f"{prefix}.").split(".")[0] if key.startswith(f"{prefix}.") else ""
        if name in form.fields:
            form.add_error(name, message)
        else:
            form.add_error(None, message)
