"""Forms of the run pages (filters; the start form, generated from the agent's input schema,
with a JSON box beside it), and the admin form of a checkpoint retention policy."""

from __future__ import annotations

import json
from typing import Any

from django import forms

from agents.retention_models import RetentionPolicy
from agents.runtime.registry import agent_list
from approvals.models import AgentRun
from approvals.schema_form import schema_errors_attach, schema_fields
from core.json_limits import json_problem


def _agent_choices() -> list[tuple[str, str]]:
    return [(spec.name, spec.name) for spec in agent_list()]


class RunFilterForm(forms.Form):
    status = forms.ChoiceField(label="Status", required=False)
    agent = forms.ChoiceField(label="Agent", required=False)

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["status"].choices = [("", "Any status"), *AgentRun.Status.choices]
        self.fields["agent"].choices = [("", "Any agent"), *_agent_choices()]

    def filters(self) -> dict[str, Any]:
        data = self.cleaned_data if self.is_valid() else {}
        return {"status": data.get("status") or None, "agent": data.get("agent") or None}


class RunStartForm(forms.Form):
    agent = forms.ChoiceField(label="Agent")
    input = forms.CharField(
        label="Input (JSON object)",
        widget=forms.Textarea(attrs={"rows": 8, "class": "mono", "spellcheck": "false"}),
        help_text="Validated against the agent's input schema before the run starts.",
    )

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = _agent_choices()

    def clean_input(self) -> dict[str, Any]:
        try:
            value = json.loads(self.cleaned_data["input"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
            ) from None
        except RecursionError:
            raise forms.ValidationError("Not valid JSON: nested too deeply.") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("The input must be a JSON object.")
        problem = json_problem(value)
        if problem is not None:
            where = f"{problem.path}: " if problem.path else ""
            raise forms.ValidationError(f"The input {where}{problem.message}.")
        return value

    def add_start_errors(self, errors: dict[str, str]) -> None:
        """Attach RunStartError.errors ("agent", "input", "input.<field>") to the fields."""
        for key, message in errors.items():
            if key == "agent":
                self.add_error("agent", message)
            elif key == "input":
                self.add_error("input", message)
            elif key.startswith("input."):
                self.add_error("input", f"{key.removeprefix('input.')}: {message}")
            else:
                self.add_error(None, message)


class RunAgentForm(forms.Form):
    """Which agent the start form is for (``?agent=``; an unknown name falls back to the first)."""

    agent = forms.ChoiceField(label="Agent")

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.fields["agent"].choices = _agent_choices()


class RunInputForm(forms.Form):
    """One input per property of the agent's input schema (fields named ``input-<property>``),
    prefilled from the schema's defaults and the agent's example input. The start service
    validates the typed values again against the same schema."""

    def __init__(
        self,
        *args: Any,
        schema: dict[str, Any],
        example: dict[str, Any] | None = None,
        **kwargs: Any,
    ):
        kwargs.setdefault("prefix", "input")
        properties = schema.get("properties") or {}
        defaults = {
            name: node["default"]
            for name, node in properties.items()
            if isinstance(node, dict) and "default" in node
        }
        kwargs.setdefault("initial", {**defaults, **(example or {})})
        super().__init__(*args, **kwargs)
        fields, _nullable = schema_fields(schema, {}, extra=False)
        self.fields.update(fields)

    def input_value(self) -> dict[str, Any]:
        """The run input from cleaned_data (call after is_valid): a blank optional input is
        left out, so the agent's own default applies."""
        result: dict[str, Any] = {}
        for name, field in self.fields.items():
            value = self.cleaned_data.get(name)
            if isinstance(field, forms.BooleanField):
                result[name] = bool(value)
            elif value not in (None, ""):
                result[name] = value
        return result

    def add_start_errors(self, errors: dict[str, str]) -> None:
        """Attach RunStartError.errors ("input.<field>" next to its input; the rest above)."""
        schema_errors_attach(self, errors, prefix="input")


class RetentionPolicyAdminForm(forms.ModelForm):
    """The agent is chosen from the registered agents (a typo would leave the real agent on
    the default policy); a policy kept for an agent no longer registered stays editable."""

    agent = forms.ChoiceField(label="Agent")

    class Meta:
        model = RetentionPolicy
        fields = ("agent", "keep_days", "action")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = _agent_choices()
        current = self.instance.agent if self.instance.pk else ""
        if current and current not in {name for name, _ in choices}:
            choices.append((current, f"{current} (not registered)"))
        self.fields["agent"].choices = [("", "---------"), *choices]
