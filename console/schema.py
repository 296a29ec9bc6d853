"""The OpenAPI schema's shared answers: what every operation may answer besides its own.

A drf-spectacular post-processing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]), so a new
operation is documented without repeating them: 401 for a client without a valid token, 403 for
one not signed in or not allowed, 429 when a throttle refuses it, 400 where there is input (a body or query parameters), 413 and 415 where there is a
body. All of them in the one error format (the ``Error`` component, core.rest.ErrorSerializer).
"""

from __future__ import annotations

from typing import Any

ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
SHARED = {
    "400": "Invalid input: `errors` names each field.",
    "401": "No valid token: missing, malformed, expired or revoked.",
    "403": "Not signed in, or not allowed.",
    "429": "Too many requests: try again after `Retry-After` seconds.",
    "413": "The request body is too large.",
    "415": "The request body is not JSON.",
}
# Operations anyone may call (no authentication, so never a 403).
PUBLIC_OPERATIONS = {"auth_token"}


def _answers(operation: dict[str, Any]) -> list[str]:
    codes = ["429"]  # every operation is throttled (core/throttles.py)
    if operation.get("operationId") not in PUBLIC_OPERATIONS:
        codes += ["401", "403"]
    has_query = any(p.get("in") == "query" for p in operation.get("parameters", []))
    if "requestBody" in operation or has_query:
        codes.append("400")
    if "requestBody" in operation:
        codes += ["413", "415"]
    return codes


def api_errors_documented(result: dict[str, Any], generator: Any, request: Any, public: bool):
    for methods in result.get("paths", {}).values():
        for operation in methods.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for code in _answers(operation):
                operation["responses"].setdefault(
                    code, {"description": SHARED[code], "content": ERROR}
                )
    return result
