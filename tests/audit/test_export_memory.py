"""Exporting 200k events streams in bounded memory (the figure is printed)."""

from __future__ import annotations

import time
import tracemalloc

import pytest

from audit.models import AuditExport
from audit.services import events_seed
from audit.verify import export_file_verify

EVENTS = 200_000
# Rows are fetched 2,000 at a time and written in 64 KiB pieces; a full materialisation of
# 200k rows would take hundreds of MiB.
PEAK_LIMIT_BYTES = 16 * 1024 * 1024


@pytest.mark.django_db
def test_exporting_200k_events_keeps_peak_memory_bounded(client, frank, tmp_path):
    started = time.monotonic()
    events_seed(count=EVENTS)
    seeded = time.monotonic()
    client.force_login(frank)
    # Warm up first: the first request imports every view module, which is not export memory.
    assert client.get("/api/audit/", {"page_size": 1}).status_code == 200
    path = tmp_path / "export.jsonl"

    tracemalloc.start()
    try:
        response = client.get("/api/audit/export.jsonl")
        with path.open("wb") as handle:
            for chunk in response.streaming_content:
                handle.write(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    exported = time.monotonic()

    with path.open("rb") as handle:
        result, info = export_file_verify(handle)
    print(
        f"\naudit export of {EVENTS} events: peak traced memory {peak / 1024 / 1024:.1f} MiB, "
        f"file {path.stat().st_size / 1024 / 1024:.1f} MiB; seed {seeded - started:.1f}s, "
        f"export {exported - seeded:.1f}s, offline verify {time.monotonic() - exported:.1f}s"
    )
    assert result.ok, result.reason
    assert result.count == EVENTS
    assert AuditExport.objects.get(pk=info["export_id"]).row_count == EVENTS
    assert peak < PEAK_LIMIT_BYTES
