"""Personal data in audit events, sealed per key under the run's data key (audit/private.py):
the chain hashes the ciphertext, so it verifies after the key is destroyed (erasure), on its
fast path; readers (event page, API, admin) see the values opened, or "erased"."""

from __future__ import annotations

import json
import uuid

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext

from audit import canonical, verify
from audit.batch import events_record
from audit.canonical import CanonicalError
from audit.models import AuditEvent
from audit.private import event_data_open, events_data_open
from audit.services import event_record
from core.models import DataKey
from core.sealing import MARKER, datakey_create, datakey_scope, datakeys_destroy, token_seal

pytestmark = pytest.mark.django_db

SECRET = "grace.hopper@example.com/42"
INPUT = {"customer": SECRET, "amount": 120, "items": ["été", 1.5]}


def _sealed_event(run=None, **private) -> AuditEvent:
    run = run or uuid.uuid4()
    return event_record(
        action="run.created",
        actor="system:test",
        run_id=run,
        data={"agent": "refund_agent"},
        private=private or {"input": INPUT},
    )


def _stored(event: AuditEvent) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT data, canonical FROM {AuditEvent._meta.db_table} WHERE seq = %s",
            [event.seq],
        )
        data, text = cursor.fetchone()
    return f"{data if isinstance(data, str) else json.dumps(data)}\n{text}"


def _fast_path_misses(monkeypatch) -> list:
    """The rows chain_verify_db hands to its slow check (none, on the fast path)."""
    misses: list = []
    real = verify._row_problem
    monkeypatch.setattr(
        verify, "_row_problem", lambda values, **kw: misses.append(values) or real(values, **kw)
    )
    return misses


def test_a_private_value_is_stored_sealed_and_opens_to_what_was_recorded():
    event = _sealed_event()

    assert SECRET not in _stored(event)
    envelope = event.data["input"]
    assert type(envelope) is dict and list(envelope) == [MARKER]
    assert envelope[MARKER].startswith(f"v1.{event.run_id.hex}.")
    assert event.data["agent"] == "refund_agent"
    assert event_data_open(event) == {"agent": "refund_agent", "input": INPUT}
    stored = AuditEvent.objects.get(seq=event.seq)
    assert event_data_open(stored) == {"agent": "refund_agent", "input": INPUT}


def test_private_without_run_id_is_a_type_error():
    with pytest.raises(TypeError, match="run_id"):
        event_record(action="run.created", actor="system:test", private={"input": INPUT})
    with pytest.raises(TypeError, match="run_id"):
        events_record([{"action": "run.created", "actor": "t", "private": {"input": INPUT}}])
    assert not AuditEvent.objects.exists()


def test_a_private_key_also_in_data_is_a_value_error():
    with pytest.raises(ValueError, match="input"):
        event_record(
            action="run.created",
            actor="system:test",
            run_id=uuid.uuid4(),
            data={"input": "plain"},
            private={"input": INPUT},
        )
    assert not AuditEvent.objects.exists()


def test_what_rfc_8785_cannot_write_is_refused_naming_its_path():
    with pytest.raises(CanonicalError) as refused:
        _sealed_event(input={"amount": float("nan")})
    assert "data.input.amount" in str(refused.value)
    assert not AuditEvent.objects.exists()


def test_a_big_integer_opens_as_the_double_an_unsealed_event_records():
    plain = event_record(action="x", actor="t", run_id=uuid.uuid4(), data={"n": 10**21})
    sealed = _sealed_event(input={"n": 10**21})
    assert event_data_open(sealed)["input"] == plain.data == {"n": 1e21}


def test_a_sealed_event_is_written_by_the_orjson_fast_path(monkeypatch):
    # The envelope is an exact dict: canonical_text never falls back to the rfc8785 writer.
    def refuse(value):
        raise AssertionError("rfc8785 writer used")

    monkeypatch.setattr(canonical.rfc8785, "dumps", refuse)
    event = _sealed_event(input={"customer": SECRET, "n": 1})
    assert event_data_open(event)["input"] == {"customer": SECRET, "n": 1}


def test_a_batch_seals_each_events_private_values_reading_the_keys_in_one_query():
    runs = [uuid.uuid4() for _ in range(3)]
    for run in runs:
        datakey_create(run)
    with transaction.atomic(), CaptureQueriesContext(connection) as queries:
        rows = events_record(
            [
                {"action": "run.completed", "actor": "t", "run_id": run, "private": {"output": n}}
                for n, run in enumerate(runs)
            ]
            + [{"action": "approval.reminded", "actor": "t", "data": {"n": 9}}]
        )
    keys = [q for q in queries if DataKey._meta.db_table in q["sql"]]
    assert len(keys) == 1
    stored = list(AuditEvent.objects.order_by("seq"))
    assert [type(e.data.get("output")) for e in stored[:3]] == [dict] * 3
    assert [event_data_open(e) for e in stored] == [{"output": 0}, {"output": 1}, {"output": 2}] + [
        {"n": 9}
    ]
    assert [r.canonical for r in rows] == [e.canonical for e in stored]
    assert verify.chain_verify_db().ok


def test_after_the_key_is_destroyed_the_chain_verifies_on_its_fast_path(monkeypatch):
    run = uuid.uuid4()
    _sealed_event(run)
    events_record(
        [{"action": "run.completed", "actor": "t", "run_id": run, "private": {"output": INPUT}}]
    )
    event_record(action="policy.changed", actor="t", data={"n": 1})
    datakeys_destroy([run])
    misses = _fast_path_misses(monkeypatch)

    result = verify.chain_verify_db()

    assert result.ok and result.count == 3, result.reason
    assert misses == []
    out = []
    call_command("audit_verify", stdout=type("W", (), {"write": lambda self, s: out.append(s)})())
    assert out[0].startswith("OK: 3 events")


def test_an_erased_value_reads_as_erased_and_the_rest_stays():
    event = _sealed_event()
    datakeys_destroy([event.run_id])

    opened = event_data_open(AuditEvent.objects.get(seq=event.seq))

    assert opened == {"agent": "refund_agent", "input": "erased"}


def test_only_the_events_own_envelopes_under_their_own_key_are_opened():
    run, other = uuid.uuid4(), uuid.uuid4()
    datakey_create(run)
    foreign = {MARKER: token_seal(other, b'"x"', label="audit.note")}
    moved = {MARKER: token_seal(run, json.dumps(SECRET).encode(), label="audit.output")}
    event = event_record(
        action="run.forked",
        actor="t",
        run_id=run,
        data={"foreign": foreign, "note": moved, "nested": {"x": foreign}, "odd": {MARKER: "no"}},
    )
    # Another run's token, a token moved to another key, a nested look-alike and a token that
    # is not one are all shown as they are stored (and none raises).
    assert event_data_open(event) == event.data


def test_a_page_of_events_reads_its_runs_keys_in_one_query():
    events = [_sealed_event() for _ in range(4)] + [
        event_record(action="x", actor="t", run_id=uuid.uuid4(), data={"n": 1})
    ]
    with datakey_scope(), CaptureQueriesContext(connection) as queries:
        opened = events_data_open(events)
        opened_again = [event_data_open(e) for e in events]
    assert len(queries) == 1
    assert opened == opened_again and opened[0]["input"] == INPUT


def test_the_event_page_shows_the_value_opened_then_erased(client, frank):
    event = _sealed_event()
    client.force_login(frank)

    page = client.get(f"/audit/events/{event.seq}/").content.decode()
    assert "grace.hopper@example.com" in page and MARKER not in page

    datakeys_destroy([event.run_id])
    page = client.get(f"/audit/events/{event.seq}/").content.decode()
    assert "grace.hopper@example.com" not in page and MARKER not in page
    assert "<pre>&quot;erased&quot;</pre>" in page


def test_the_api_lists_the_values_opened_then_erased(client, frank):
    event = _sealed_event()
    client.force_login(frank)

    (row,) = client.get("/api/audit/").json()["results"]
    assert row["data"] == {"agent": "refund_agent", "input": INPUT}

    datakeys_destroy([event.run_id])
    (row,) = client.get("/api/audit/").json()["results"]
    assert row["data"] == {"agent": "refund_agent", "input": "erased"}
    assert row["hash"] == event.hash


def test_the_admin_shows_the_record_opened(client, admin):
    event = _sealed_event()
    client.force_login(admin)

    page = client.get(f"/admin/audit/auditevent/{event.pk}/change/").content.decode()

    assert "Data (opened)" in page and "grace.hopper@example.com" in page
