"""Attack: what an administrator types as a rule's evidence never breaks the admin or the
audit chain (invariant 15)."""

from __future__ import annotations

from typing import Any

import pytest

from audit.verify import chain_verify_db

pytestmark = pytest.mark.django_db

ADD = "/admin/approvals/autonomyrule/add/"


def rule_form(**fields: Any) -> dict[str, Any]:
    return {
        "tool": "rollback_deploy",
        "tier": "",
        "mode": "ask",
        "sample_percent": 10,
        "confidence_below": "",
        "note": "",
        "evidence": "{}",
    } | fields


@pytest.mark.parametrize(
    "evidence",
    ['{"approve_rate": NaN}', '{"approve_rate": 1e400}', '{"note": "a\\u0000b"}', "[1, 2]"],
)
def test_a_rule_s_evidence_that_json_cannot_hash_is_refused_not_a_500(admin_client, evidence):
    admin_client.raise_request_exception = False
    response = admin_client.post(ADD, rule_form(evidence=evidence))
    assert response.status_code < 500
    assert chain_verify_db().ok
