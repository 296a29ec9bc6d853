"""Attack: bad input to the new pages answers 4xx, never a 500."""

from __future__ import annotations

import pytest

from tests.support.people import client_for

pytestmark = pytest.mark.django_db


def _status(client, method: str, url: str, data=None) -> int:
    client.raise_request_exception = False
    response = getattr(client, method)(url, data or {})
    return response.status_code


def test_a_batch_page_whose_agent_holds_a_nul_is_not_a_500(bob):
    assert _status(client_for(bob), "get", "/batches/a%00b/x/y/") < 500


def test_a_batch_decision_posted_to_a_key_holding_a_nul_is_not_a_500(bob):
    data = {"item": "1:h", "decision": "approve"}
    assert _status(client_for(bob), "post", "/batches/a%00b/x/y/decide/", data) < 500


def test_a_batch_item_whose_id_is_a_superscript_digit_is_a_400_not_a_500(bob):
    data = {"item": "\u00b2:h", "decision": "approve"}
    assert _status(client_for(bob), "post", "/batches/a/b/c/decide/", data) == 400


def test_applying_advice_to_a_tool_name_holding_a_nul_is_not_a_500(admin):
    data = {"scope": "tool:a\x00", "target_mode": "sampled"}
    assert _status(client_for(admin), "post", "/autonomy/apply/", data) < 500


def test_applying_advice_to_a_tier_name_holding_a_nul_is_not_a_500(admin):
    data = {"scope": "tier:a\x00", "target_mode": "sampled"}
    assert _status(client_for(admin), "post", "/autonomy/apply/", data) < 500
