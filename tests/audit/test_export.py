"""Exports: streamed, filtered as on screen, audited, and verifiable offline."""

from __future__ import annotations

import csv
import hashlib
import io
import json

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.models import AuditEvent, AuditExport
from audit.services import compliance_group_ensure, event_record, events_seed
from audit.verify import export_file_verify

pytestmark = pytest.mark.django_db

JSONL_URL = "/api/audit/export.jsonl"
CSV_URL = "/api/audit/export.csv"


def _download(client, user, url: str, **params) -> tuple[bytes, AuditExport]:
    client.force_login(user)
    response = client.get(url, params)
    assert response.status_code == 200, response.content
    body = b"".join(response.streaming_content)
    export = AuditExport.objects.get(pk=int(response["X-Audit-Export-Id"]))
    return body, export


def _lines(body: bytes) -> list[bytes]:
    return body.splitlines(keepends=True)


def _mixed_events(bob, carol) -> None:
    for n in range(6):
        event_record(action="run.created", actor=bob, data={"n": n})
        event_record(
            action="approval.decided",
            actor=carol,
            approval_id=100 + n,
            tool="refund" if n % 2 else "ticket",
            data={"decision": "approve", "shown": {"payload_hash": "ab" * 32}},
        )


def test_an_unfiltered_jsonl_export_verifies_from_the_file_alone(client, frank, bob, carol):
    _mixed_events(bob, carol)

    body, export = _download(client, frank, JSONL_URL)
    result, info = export_file_verify(_lines(body))

    assert result.ok, result.reason
    assert (result.count, result.first_seq, result.last_seq) == (12, 1, 12)
    assert info["head_seq"] == 12
    assert info["file_sha256"] == hashlib.sha256(body).hexdigest()
    assert export.file_sha256 == info["file_sha256"]


def test_the_export_is_itself_audited_and_its_manifest_completed(client, erin, bob, carol):
    # erin (the manager) is the exporter here, as a compliance officer: the checks name her.
    erin.groups.add(compliance_group_ensure())
    _mixed_events(bob, carol)

    body, export = _download(client, erin, JSONL_URL, action="approval.decided")

    export.refresh_from_db()
    assert export.status == AuditExport.Status.COMPLETE
    assert (export.row_count, export.first_seq, export.last_seq) == (6, 2, 12)
    assert export.head_seq == 12
    assert export.head_hash == AuditEvent.objects.get(seq=12).hash
    assert export.filters == {"action": "approval.decided"}
    assert export.created_by == erin
    created, completed = AuditEvent.objects.filter(seq__gt=12).order_by("seq")
    assert (created.action, created.actor_username) == ("export.created", "erin")
    assert created.data["export_id"] == export.pk
    assert completed.action == "export.completed"
    assert completed.data["file_sha256"] == hashlib.sha256(body).hexdigest()
    assert completed.data["row_count"] == 6


def test_a_filtered_export_holds_exactly_the_filtered_events(client, frank, bob, carol):
    _mixed_events(bob, carol)

    body, _ = _download(client, frank, JSONL_URL, actor="carol", tool="refund")
    records = [json.loads(line) for line in _lines(body)]

    events = [r for r in records if r["record"] == "event"]
    assert [e["approval_id"] for e in events] == [101, 103, 105]
    assert records[0]["filters"] == {"actor": "carol", "tool": "refund"}
    assert export_file_verify(_lines(body))[0].ok


def test_a_deleted_line_is_caught_by_the_offline_verify(client, frank):
    events_seed(count=20)
    body, _ = _download(client, frank, JSONL_URL)
    lines = _lines(body)

    del lines[8]  # the event with seq 8
    result, _ = export_file_verify(lines)

    assert not result.ok
    assert result.broken_seq == 8


def test_a_deleted_line_of_a_filtered_export_is_caught(client, frank, bob, carol):
    _mixed_events(bob, carol)
    body, _ = _download(client, frank, JSONL_URL, action="approval.decided")
    lines = _lines(body)

    del lines[3]
    result, _ = export_file_verify(lines)

    assert not result.ok
    assert "count" in result.reason


def test_reordered_lines_are_caught_by_the_offline_verify(client, frank):
    events_seed(count=20)
    body, _ = _download(client, frank, JSONL_URL)
    lines = _lines(body)

    lines[5], lines[6] = lines[6], lines[5]  # seq 5 and seq 6
    result, _ = export_file_verify(lines)

    assert not result.ok
    assert result.broken_seq == 5


def test_an_edited_line_is_caught_at_its_seq(client, frank):
    events_seed(count=20)
    body, _ = _download(client, frank, JSONL_URL)
    lines = _lines(body)

    record = json.loads(lines[11])
    record["actor"] = "system:forged"
    lines[11] = (json.dumps(record) + "\n").encode()
    result, _ = export_file_verify(lines)

    assert (result.ok, result.broken_seq) == (False, 11)


def test_a_truncated_file_is_caught(client, frank):
    events_seed(count=5)
    body, _ = _download(client, frank, JSONL_URL)

    result, _ = export_file_verify(_lines(body)[:-1])

    assert not result.ok
    assert "summary" in result.reason


def test_the_export_is_a_snapshot_at_its_head(client, frank):
    events_seed(count=4)

    body, export = _download(client, frank, JSONL_URL)

    events = [json.loads(line) for line in _lines(body)][1:-1]
    assert [event["seq"] for event in events] == [1, 2, 3, 4]
    assert export.head_seq == 4  # the export's own events come after its head


def test_csv_export_has_every_hashed_column_and_neutralises_formulas(client, frank):
    event_record(action="run.created", actor='=HYPERLINK("http://x")', data={"k": "v"})

    body, export = _download(client, frank, CSV_URL)
    rows = list(csv.DictReader(io.StringIO(body.decode())))

    assert export.format == "csv"
    assert len(rows) == 1
    assert rows[0]["actor"].startswith("'=")
    assert json.loads(rows[0]["data"]) == {"k": "v"}
    assert rows[0]["hash"] == AuditEvent.objects.get(seq=1).hash
    assert export.file_sha256 == hashlib.sha256(body).hexdigest()


def test_invalid_filters_get_400_and_start_no_export(client, frank):
    client.force_login(frank)

    response = client.get(JSONL_URL, {"run": "not-a-uuid"})

    assert response.status_code == 400
    assert AuditExport.objects.count() == 0


def test_reviewers_may_not_export(client, bob):
    client.force_login(bob)

    assert client.get(JSONL_URL).status_code == 403
    assert client.get(CSV_URL).status_code == 403


def test_audit_verify_command_checks_a_file_and_its_manifest(client, frank, tmp_path):
    events_seed(count=12)
    body, export = _download(client, frank, JSONL_URL)
    path = tmp_path / "export.jsonl"
    path.write_bytes(body)
    out = io.StringIO()

    call_command("audit_verify", "--file", str(path), stdout=out)

    assert "OK: 12 events" in out.getvalue()
    assert f"manifest #{export.pk} matches" in out.getvalue()


def test_audit_verify_command_fails_on_a_tampered_file(client, frank, tmp_path):
    events_seed(count=12)
    body, _ = _download(client, frank, JSONL_URL)
    lines = _lines(body)
    del lines[4]
    path = tmp_path / "export.jsonl"
    path.write_bytes(b"".join(lines))

    with pytest.raises(CommandError, match="BROKEN at seq 4"):
        call_command("audit_verify", "--file", str(path), "--offline")


def test_audit_verify_command_catches_a_file_whose_summary_was_recomputed(
    client, frank, bob, carol, tmp_path
):
    from audit.verify import digest_start, digest_step

    _mixed_events(bob, carol)
    body, _ = _download(client, frank, JSONL_URL, action="approval.decided")
    records = [json.loads(line) for line in _lines(body)]
    del records[2]  # drop one event, then forge a consistent summary
    digest = digest_start(records[0])
    for record in records[1:-1]:
        digest = digest_step(digest, record["hash"])
    records[-1].update(count=5, digest=digest)
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))

    with pytest.raises(CommandError, match="MISMATCH with manifest"):
        call_command("audit_verify", "--file", str(path))
