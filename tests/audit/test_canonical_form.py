"""Invariant 15: the hash covers the stored RFC 8785 text, so numbers that Postgres jsonb
rewrites (-0.0, 1e21, 1.0, 1e300, many digits) cannot break the chain; version 1 rows keep
verifying; the standalone verifier of docs/audit.md checks a real export."""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import rfc8785
from django.db import connection

from audit.canonical import CanonicalError, canonical_hash, canonical_json, payload_hash
from audit.models import AuditEvent
from audit.services import GENESIS_HASH, event_hash, event_record, event_row
from audit.verify import chain_verify_db, export_file_verify
from tests.support.audit import triggers_disabled

pytestmark = pytest.mark.django_db

DOCS = Path(__file__).resolve().parents[2] / "docs"
VERIFIER = DOCS / "verify_audit.py"
# Numbers jsonb stores differently from how Python writes them.
REWRITTEN = {
    "negative_zero": -0.0,
    "big": 1e21,
    "whole": 1.0,
    "huge": 1e300,
    "tiny": 5e-324,
    "digits": 0.1 + 0.2,
    "max": 1.7976931348623157e308,
    "safe": 2**53 - 1,
}


def _legacy_event(*, seq: int, prev_hash: str, data: dict) -> AuditEvent:
    """A chain version 1 row, as event_record wrote them before chain versions existed."""
    event = AuditEvent(
        seq=seq,
        at=AuditEvent._meta.get_field("at").to_python("2026-01-02T03:04:05.000006+00:00"),
        actor="system:legacy",
        action="run.created",
        data=data,
        prev_hash=prev_hash,
        chain_version=1,
    )
    event.hash = event_hash(prev_hash, event_row(event))
    event.save(force_insert=True)
    return event


def test_numbers_that_jsonb_rewrites_still_verify(bob):
    event_record(action="run.created", actor=bob, data={"input": REWRITTEN})

    stored = AuditEvent.objects.get()
    result = chain_verify_db()

    assert result.ok, result.reason
    assert stored.chain_version == 2
    assert json.loads(stored.canonical)["data"]["input"]["big"] == 1e21


def test_the_hash_covers_the_stored_rfc8785_text_of_the_record(bob):
    event = event_record(action="run.created", actor=bob, run_id=None, data={"b": 1.0, "a": -0.0})

    stored = AuditEvent.objects.get(pk=event.pk)
    record = {"chain_version": 2, **event_row(stored)}

    assert stored.canonical == rfc8785.dumps(record).decode()
    assert '"data":{"a":0,"b":1}' in stored.canonical
    assert stored.hash == hashlib.sha256((GENESIS_HASH + stored.canonical).encode()).hexdigest()


def test_version_1_rows_keep_verifying_before_version_2_rows(bob):
    legacy = _legacy_event(seq=1, prev_hash=GENESIS_HASH, data={"amount": 12.5})
    event_record(action="run.completed", actor=bob, data={"ok": True})

    result = chain_verify_db()

    assert (result.ok, result.count) == (True, 2), result.reason
    assert AuditEvent.objects.get(seq=2).prev_hash == legacy.hash
    assert AuditEvent.objects.get(seq=1).canonical is None


def test_a_data_column_edited_behind_its_canonical_text_is_reported(bob):
    event_record(action="run.created", actor=bob, data={"amount": 10})
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET data = %s", ['{"amount": 1000}'])

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, 1)
    assert result.reason == "column data differs from the canonical text"


def test_an_actor_column_edited_behind_its_canonical_text_is_reported(bob):
    event_record(action="run.created", actor=bob)
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute("UPDATE audit_auditevent SET actor = 'system:nobody'")

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, 1)
    assert result.reason == "column actor differs from the canonical text"


def test_an_edited_canonical_text_is_reported_at_its_seq(bob):
    event_record(action="run.created", actor=bob, data={"amount": 10})
    event_record(action="run.created", actor=bob, data={"amount": 20})
    with triggers_disabled(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE audit_auditevent SET canonical = REPLACE(canonical, '20', '25') WHERE seq = 2"
        )

    result = chain_verify_db()

    assert (result.ok, result.broken_seq) == (False, 2)
    assert "canonical text" in result.reason


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 10**400, "\ud800"])
def test_a_value_rfc8785_cannot_hold_is_refused_with_one_error(bob, value):
    with pytest.raises(CanonicalError) as caught:
        event_record(action="run.created", actor=bob, data={"input": {"x": [value]}})

    assert caught.value.errors == {"data.input.x.0": caught.value.errors["data.input.x.0"]}
    assert not AuditEvent.objects.exists()


def test_an_integer_jsonb_gave_back_for_a_double_is_recorded_as_that_double(bob):
    # An agent's 1e21 comes back from jsonb as an int: recording it again must not fail.
    event_record(action="approval.decided", actor=bob, data={"shown": {"amount": 10**21}})

    stored = AuditEvent.objects.get()

    assert '"amount":1e+21' in stored.canonical
    assert chain_verify_db().ok


def test_payload_hashes_are_rfc8785_and_stable_across_the_jsonb_rewrite():
    proposed = {"amount": 1e21, "fee": 1.0, "refund": -0.0}
    as_jsonb_gives_back = {"amount": 10**21, "fee": 1, "refund": 0}

    assert canonical_hash(proposed) == canonical_hash(as_jsonb_gives_back)
    assert (
        canonical_hash(proposed)
        == hashlib.sha256(b'{"amount":1e+21,"fee":1,"refund":0}').hexdigest()
    )
    # The old form is kept for internal fingerprints, and it is not stable:
    assert payload_hash(proposed) != payload_hash(as_jsonb_gives_back)


# --- exports and the standalone verifier ------------------------------------------------------


def _export(client, frank) -> bytes:
    client.force_login(frank)
    response = client.get("/api/audit/export.jsonl")
    assert response.status_code == 200
    return b"".join(response.streaming_content)


def _run_verifier(tmp_path: Path, body: bytes) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "export.jsonl"
    path.write_bytes(body)
    return subprocess.run(
        [sys.executable, "-I", str(VERIFIER), str(path)], capture_output=True, text=True
    )


def _mixed_chain(bob) -> None:
    legacy = _legacy_event(seq=1, prev_hash=GENESIS_HASH, data={"amount": 12.5, "é": "ü"})
    assert legacy.seq == 1
    event_record(action="run.created", actor=bob, data={"input": REWRITTEN, "k\U0001f600": "v"})
    event_record(action="approval.decided", actor=bob, approval_id=7, tool="refund_issue")


def test_an_export_of_a_mixed_chain_verifies_in_the_console_and_standalone(
    client, frank, bob, tmp_path
):
    _mixed_chain(bob)
    body = _export(client, frank)

    result, _ = export_file_verify(body.splitlines(keepends=True))
    standalone = _run_verifier(tmp_path, body)

    assert result.ok, result.reason
    assert standalone.returncode == 0, standalone.stdout + standalone.stderr
    assert standalone.stdout.startswith("OK: 3 events")  # export.created is past the head


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"amount":12.5', '"amount":13.5'),  # a version 1 line's field
        ("1e+21", "2e+21"),  # a version 2 line's field and its canonical text alike
        ('"tool":"refund_issue"', '"tool":"refund_other"'),  # a field beside the canonical text
    ],
)
def test_a_tampered_export_line_fails_both_verifiers(client, frank, bob, tmp_path, old, new):
    _mixed_chain(bob)
    body = _export(client, frank).decode()
    assert old in body
    tampered = body.replace(old, new).encode()

    result, _ = export_file_verify(tampered.splitlines(keepends=True))
    standalone = _run_verifier(tmp_path, tampered)

    assert not result.ok
    assert standalone.returncode == 1
    assert standalone.stdout.startswith("BROKEN at seq")


def test_the_verifier_in_the_docs_is_the_one_tested():
    text = (DOCS / "audit.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)

    assert VERIFIER.read_text() in blocks
    assert "import audit" not in VERIFIER.read_text() and "from audit" not in VERIFIER.read_text()


def test_export_lines_are_canonical_json_of_their_fields(client, frank, bob):
    _mixed_chain(bob)
    lines = _export(client, frank).decode().splitlines()

    assert all(line == canonical_json(json.loads(line)) for line in lines)


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\x85"])
def test_a_note_holding_a_unicode_line_separator_verifies_standalone(
    client, frank, bob, tmp_path, separator
):
    # Any user can put these in a note, a run input or (\x85, latin-1) a User-Agent header;
    # canonical_json keeps them raw, and str.splitlines() splits a line at them.
    event_record(action="approval.decided", actor=bob, data={"note": f"a{separator}b"})
    body = _export(client, frank)

    standalone = _run_verifier(tmp_path, body)

    assert standalone.returncode == 0, standalone.stdout + standalone.stderr
    assert standalone.stdout.startswith("OK: 1 events")


@pytest.mark.parametrize(
    ("old", "new"), [('"refund":0', '"refund":false'), ('"fee":1,', '"fee":true,')]
)
def test_a_number_tampered_into_a_boolean_fails_the_standalone_verifier(
    client, frank, bob, tmp_path, old, new
):
    event_record(action="run.created", actor=bob, data={"input": {"fee": 1, "refund": 0}})
    body = _export(client, frank).decode()
    assert old in body
    tampered = body.replace(old, new, 1).encode()

    result, _ = export_file_verify(tampered.splitlines(keepends=True))
    standalone = _run_verifier(tmp_path, tampered)

    assert not result.ok
    assert standalone.returncode == 1, standalone.stdout


def test_a_user_agent_holding_nul_is_recorded_on_every_database_not_a_500(alice, bob, queued):
    # Any client sets its User-Agent; Postgres text columns refuse U+0000, so every audited
    # request carrying one (a decision, a login) was a 500 there, after the checks passed.
    from tests.support.people import rest_client_for
    from tests.support.probes import ProbeApprovalFactory, ProbeRunFactory

    approval = ProbeApprovalFactory(run=ProbeRunFactory(requested_by=alice))
    response = rest_client_for(bob).post(
        f"/api/approvals/{approval.id}/decision/",
        {"decision": "approve", "payload_hash": approval.payload_hash},
        format="json",
        HTTP_USER_AGENT="curl\x00/8",
    )

    assert response.status_code == 200, response.content
    assert chain_verify_db().ok


def test_an_unfiltered_export_cut_before_its_head_fails_the_standalone_verifier(
    client, frank, bob, tmp_path
):
    # Drop the last event (the decision) and rewrite the summary, which needs no key; the
    # header, untouched, still says head_seq 2. The console's verifier refuses the file (it
    # stops before its head); the standalone one said OK.
    from audit.verify import digest_start, digest_step

    event_record(action="run.created", actor=bob, data={"input": {"x": 1}})
    event_record(action="approval.decided", actor=bob, approval_id=7, data={"decision": "approve"})
    header, first, _last, summary = (
        json.loads(line) for line in _export(client, frank).splitlines()
    )
    summary.update(count=1, last_seq=1, digest=digest_step(digest_start(header), first["hash"]))
    cut = "".join(canonical_json(r) + "\n" for r in (header, first, summary)).encode()

    result, _ = export_file_verify(cut.splitlines(keepends=True))
    standalone = _run_verifier(tmp_path, cut)

    assert not result.ok
    assert standalone.returncode == 1, standalone.stdout
