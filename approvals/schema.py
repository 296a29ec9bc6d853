"""Validating edited args against the JSON schema carried in the approval payload.

approvals/ never imports the agent code: the gate puts the tool's args schema into the payload,
so the reviewer's form and this check use the same machine-derived contract.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, UnknownType
from referencing.exceptions import Unresolvable


def args_errors(*, schema: dict[str, Any] | None, args: dict[str, Any]) -> dict[str, str]:
    """{"args.<field>": message} for every problem; empty when valid or no schema is known."""
    if not schema:
        return {}
    try:
        Draft202012Validator.check_schema(schema)
        found = sorted(Draft202012Validator(schema).iter_errors(args), key=lambda e: list(e.path))
    except (SchemaError, UnknownType, Unresolvable) as exc:
        # The schema came from the agent's interrupt; a broken one must not become a 500.
        return {"args": f"the agent's args schema is invalid, so edits cannot be checked: {exc}"}
    errors: dict[str, str] = {}
    for err in found:
        path = ".".join(str(part) for part in err.path)
        if not path and err.validator == "required":
            missing = err.message.split("'")[1] if "'" in err.message else ""
            path = missing
        if not path and err.validator == "additionalProperties":
            path = "non_field_errors"
        key = f"args.{path}" if path else "args"
        errors.setdefault(key, err.message)
    return errors
