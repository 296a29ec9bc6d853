"""chain_verify_db's fast path (columns written as canonical_json must be the stored text byte
for byte) lets no row through that the full check refuses: each case is a row whose hash holds
and whose text differs from RFC 8785 or from its columns in a way a looser check would miss."""

from __future__ import annotations

import hashlib

import pytest
from django.db import connection

from audit.models import AuditEvent
from audit.services import event_record, events_seed
from audit.verify import chain_verify_db
from tests.support.audit import triggers_disabled

pytestmark = pytest.mark.django_db


def _rewrite_head(old: str, new: str, *, data: str | None = None) -> int:
    """Edit the head row's text (and data column), rehashed so its hash still holds."""
    head = AuditEvent.objects.order_by("-seq").first()
    text = head.canonical.replace(old, new)
    assert text != head.canonical
    digest = hashlib.sha256((head.prev_hash + text).encode()).hexdigest()
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audit_auditevent SET canonical = %s, hash = %s WHERE seq = %s",
            [text, digest, head.seq],
        )
        if data is not None:
            cursor.execute("UPDATE audit_auditevent SET data = %s WHERE seq = %s", [data, head.seq])
    return head.seq


def _chain(bob, data) -> None:
    events_seed(count=3)
    event_record(action="run.created", actor=bob, approval_id=5, data=data)


def test_an_intact_chain_of_many_rows_verifies(bob):
    events_seed(count=1200)
    event_record(
        action="run.created", actor=bob, data={"amount": 12.5, "big": 2**60, "k\U0001f600": 1}
    )
    events_seed(count=10)

    result = chain_verify_db(chunk_size=100)

    assert (result.ok, result.count, result.last_seq) == (True, 1211, 1211), result.reason


def test_a_true_where_the_column_says_1_is_reported(bob):
    _chain(bob, {"x": 1})
    seq = _rewrite_head('"x":1', '"x":true')

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, seq)
    assert result.reason == "column data differs from the canonical text"


def test_a_double_spelled_as_python_writes_it_is_not_rfc8785(bob):
    # "5.0": canonical_json's spelling of the column, not RFC 8785's ("5").
    _chain(bob, {"x": 5.5})
    seq = _rewrite_head('"x":5.5', '"x":5.0', data='{"x": 5.0}')

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, seq)
    assert result.reason == "the canonical text is not an RFC 8785 record"


def test_a_text_with_whitespace_is_not_rfc8785(bob):
    _chain(bob, {"x": 1})
    seq = _rewrite_head('"x":1', '"x": 1')

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, seq)
    assert result.reason == "the canonical text is not an RFC 8785 record"


def test_keys_in_code_point_order_where_rfc8785_wants_utf16_order_are_reported(bob):
    # U+E000 sorts after U+1F600 in UTF-16 (0xE000 > 0xD83D), before it by code point.
    _chain(bob, {"\U0001f600": 1, "\ue000": 2})
    text = AuditEvent.objects.order_by("-seq").first().canonical
    assert text.index("\U0001f600") < text.index("\ue000")  # RFC 8785 order, as recorded
    seq = _rewrite_head('"\U0001f600":1,"\ue000":2', '"\ue000":2,"\U0001f600":1')

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, seq)
    assert result.reason == "the canonical text is not an RFC 8785 record"


def test_an_approval_id_the_text_gives_as_text_is_reported(bob):
    _chain(bob, {})
    seq = _rewrite_head('"approval_id":5', '"approval_id":"5"')

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, seq)
    assert result.reason == "column approval_id differs from the canonical text"


def test_a_time_one_microsecond_off_is_reported(bob):
    _chain(bob, {})
    head = AuditEvent.objects.order_by("-seq").first()
    stamp = head.at.isoformat()
    later = head.at.replace(microsecond=(head.at.microsecond + 1) % 1_000_000)
    seq = _rewrite_head(f'"at":"{stamp}"', f'"at":"{later.isoformat()}"')

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, seq)
    assert result.reason == "column at differs from the canonical text"
