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
