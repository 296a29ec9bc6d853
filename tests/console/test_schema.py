"""The API's OpenAPI schema and its Swagger page."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.usefixtures("queued")  # every task enqueued is recorded, none runs


def test_schema_documents_every_api_operation(api, db):
    response = api.get("/api/schema/", {"format": "json"})

    assert response.status_code == 200
    paths = response.json()["paths"]
    expected = {
        "/api/auth/token/": {"post"},
        "/api/auth/tokens/": {"get", "delete"},
        "/api/auth/tokens/{token_key}/": {"delete"},
        "/api/agents/": {"get"},
        "/api/runs/": {"get", "post"},
        "/api/runs/{run_id}/": {"get"},
        "/api/runs/{run_id}/cancel/": {"post"},
        "/api/approvals/": {"get"},
        "/api/approvals/{approval_id}/": {"get"},
        "/api/approvals/{approval_id}/decision/": {"post"},
    }
    for path, methods in expected.items():
        assert methods <= set(paths[path]), path
    decide = paths["/api/approvals/{approval_id}/decision/"]["post"]
    assert {"200", "400", "403", "409", "429"} <= set(decide["responses"])
    assert {"200", "400", "429"} <= set(paths["/api/auth/token/"]["post"]["responses"])
    token = response.json()["components"]["schemas"]["Token"]["properties"]
    assert {"token", "token_key", "name", "created", "expiry"} <= set(token)
    schemes = response.json()["components"]["securitySchemes"]
    assert schemes["tokenAuth"] == {
        **schemes["tokenAuth"],
        "type": "apiKey",
        "in": "header",
        "name": "Authorization",
    }


def test_swagger_page_is_served_from_local_assets(api, db):
    response = api.get("/api/docs/")

    assert response.status_code == 200
    html = response.content.decode()
    assert "cdn.jsdelivr" not in html
    # Its setup script is a file of its own (no inline script under the CSP), naming the schema.
    assert '<script src="/api/docs/?script="></script>' in html
    assert "<script>" not in html and "<style>" not in html
    script = api.get("/api/docs/", {"script": ""})
    assert script.status_code == 200
    assert script["Content-Type"].startswith("application/javascript")
    assert "/api/schema/" in script.content.decode()


def _operations(api) -> dict[str, dict]:
    paths = api.get("/api/schema/", {"format": "json"}).json()["paths"]
    return {f"{m.upper()} {p}": op for p, ops in paths.items() for m, op in ops.items()}


def test_the_audit_list_is_documented_as_the_page_it_answers(api, admin):
    api.force_authenticate(admin)
    ok = _operations(api)["GET /api/audit/"]["responses"]["200"]["content"]["application/json"]

    assert ok["schema"] == {"$ref": "#/components/schemas/AuditEventPage"}


def test_exports_are_documented_with_the_content_types_they_send(api, admin):
    api.force_authenticate(admin)
    operations = _operations(api)

    for path, media_type in [("csv", "text/csv"), ("jsonl", "application/x-ndjson")]:
        responses = operations[f"GET /api/audit/export.{path}"]["responses"]
        assert set(responses["200"]["content"]) == {media_type}
        assert set(responses["403"]["content"]) == {"application/json"}


def test_every_operation_documents_its_refusals_and_page_size_bounds(api, admin):
    api.force_authenticate(admin)

    for name, operation in _operations(api).items():
        if operation["operationId"] != "auth_token":
            assert "403" in operation["responses"], name
        if "requestBody" in operation:
            assert {"400", "413", "415"} <= set(operation["responses"]), name
        for parameter in operation.get("parameters", []):
            if parameter["name"] == "page_size":
                bounds = parameter["schema"]["oneOf"][0]
                assert bounds["minimum"] == 1 and bounds["maximum"] >= 100, name
