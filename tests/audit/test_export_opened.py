"""Exports of sealed events: the hashed file keeps the ciphertext verbatim (it verifies offline
after erasure); ``open=1`` (compliance) adds each event's data opened, or "erased"."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from django.core.management import call_command

from audit.models import AuditEvent, AuditExport
from audit.services import event_record
from audit.verify import export_file_verify
from core.sealing import MARKER, datakeys_destroy

pytestmark = pytest.mark.django_db

SECRET = "grace.hopper@example.com/42"
INPUT = {"customer": SECRET, "amount": 120}
VERIFIER = Path(__file__).resolve().parents[2] / "docs" / "verify_audit.py"


def _events() -> uuid.UUID:
    run = uuid.uuid4()
    event_record(
        action="run.created",
        actor="system:test",
        run_id=run,
        data={"agent": "refund_agent"},
        private={"input": INPUT},
    )
    event_record(action="policy.changed", actor="system:test", data={"n": 1.5})
    return run


def _download(client, user, url: str, **params) -> tuple[bytes, AuditExport]:
    client.force_login(user)
    response = client.get(url, params)
    assert response.status_code == 200, response.content
    body = b"".join(response.streaming_content)
    return body, AuditExport.objects.get(pk=int(response["X-Audit-Export-Id"]))


def _records(body: bytes) -> list[dict]:
    return [json.loads(line) for line in body.splitlines()]


def _verifies(body: bytes, tmp_path: Path) -> None:
    """From the file alone: the console's verifier, its command, the standalone script."""
    result, _ = export_file_verify(body.splitlines(keepends=True))
    assert result.ok, result.reason
    path = tmp_path / "export.jsonl"
    path.write_bytes(body)
    out = io.StringIO()
    call_command("audit_verify", file=str(path), stdout=out)
    assert out.getvalue().startswith("OK:")
    script = subprocess.run(
        [sys.executable, str(VERIFIER), str(path)], capture_output=True, text=True, check=False
    )
    assert script.returncode == 0 and script.stdout.startswith("OK"), script.stdout


def test_the_hashed_export_keeps_the_ciphertext_and_verifies_after_erasure(client, frank, tmp_path):
    run = _events()
    datakeys_destroy([run])

    body, export = _download(client, frank, "/api/audit/export.jsonl")

    assert not export.opened
    header, created, *_ = _records(body)
    assert header["format"] == "audit-jsonl/2"
    stored = AuditEvent.objects.get(seq=1)
    assert created["data"]["input"] == stored.data["input"]  # the envelope, verbatim
    assert "opened" not in created and SECRET.encode() not in body
    _verifies(body, tmp_path)


def test_an_opened_export_carries_the_values_then_says_erased_and_still_verifies(
    client, frank, tmp_path
):
    run = _events()

    body, export = _download(client, frank, "/api/audit/export.jsonl", open="1")

    assert export.opened
    header, created, policy, summary = _records(body)
    assert header["format"] == "audit-jsonl/3"
    assert created["opened"] == {"agent": "refund_agent", "input": INPUT}
    assert created["data"]["input"][MARKER]  # the hashed fields stay as stored
    assert policy["opened"] == {"n": 1.5}
    assert summary["record"] == "summary"
    _verifies(body, tmp_path)
    audited = AuditEvent.objects.get(action="export.created", data__export_id=export.pk)
    assert audited.data["opened"] is True

    datakeys_destroy([run])
    body, _ = _download(client, frank, "/api/audit/export.jsonl", open="1")

    assert _records(body)[1]["opened"] == {"agent": "refund_agent", "input": "erased"}
    assert SECRET.encode() not in body
    _verifies(body, tmp_path)


def test_a_line_edited_in_an_opened_export_still_fails(client, frank):
    _events()
    body, _ = _download(client, frank, "/api/audit/export.jsonl", open="1")
    edited = body.replace(b'"agent":"refund_agent"', b'"agent":"other_agent"', 1)

    result, _ = export_file_verify(edited.splitlines(keepends=True))

    assert not result.ok and result.broken_seq == 1


def test_an_opened_key_in_a_version_2_file_is_refused():
    # "opened" is only part of audit-jsonl/3 files; elsewhere a line with it is not an event.
    lines = [
        json.dumps({"record": "header", "format": "audit-jsonl/2", "head_seq": 1, "head_hash": ""}),
        json.dumps({"record": "event", "seq": 1, "opened": {}}),
    ]
    result, _ = export_file_verify(lines)
    assert not result.ok and "not an event record" in result.reason


def test_an_opened_csv_export_adds_the_data_opened_column(client, frank):
    run = _events()
    datakeys_destroy([run])

    body, export = _download(client, frank, "/api/audit/export.csv", open="true")

    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert export.opened
    assert json.loads(rows[0]["data_opened"]) == {"agent": "refund_agent", "input": "erased"}
    assert MARKER in rows[0]["data"]
    plain, _ = _download(client, frank, "/api/audit/export.csv")
    assert "data_opened" not in plain.decode().splitlines()[0]


def test_an_unknown_open_value_is_a_400_and_starts_no_export(client, frank):
    client.force_login(frank)

    response = client.get("/api/audit/export.jsonl", {"open": "maybe"})

    assert response.status_code == 400
    assert "open" in response.json()["errors"]
    assert not AuditExport.objects.exists()


def test_the_log_page_offers_the_opened_exports_with_its_filters(client, frank):
    client.force_login(frank)

    page = client.get("/audit/", {"action": "run.created"}).content.decode()

    assert "/api/audit/export.jsonl?action=run.created&amp;open=1" in page
    assert "/api/audit/export.csv?action=run.created&amp;open=1" in page
