"""chain_verify_db promises constant memory; the walk's per-address cache (`ips`, added with
fast_bytes.columns_are_text) keeps every distinct client address it meets for the whole walk:
a chain whose events come from many addresses (IPv6 privacy addresses, a NAT pool, or a
client that picks its X-Forwarded-For) grows it without bound."""

from __future__ import annotations

import ipaddress
import tracemalloc

import pytest

from audit import services
from audit.services import events_seed
from audit.verify import chain_verify_db

pytestmark = pytest.mark.django_db

EVENTS = 30_000
DISTINCT = True


def _seed(monkeypatch, *, distinct: bool) -> None:
    original = services.hashed_row
    counter = iter(range(10**9))

    def with_ip(values):
        if isinstance(values, dict) and "prev_hash" not in values:
            n = next(counter) if distinct else 1
            values["ip"] = str(ipaddress.IPv6Address("2001:db8::") + n)
        return original(values)

    with monkeypatch.context() as patch:
        patch.setattr(services, "hashed_row", with_ip)
        events_seed(count=EVENTS)


def _peak() -> int:
    chain_verify_db(chunk_size=500)  # warm up imports and caches
    tracemalloc.start()
    try:
        result = chain_verify_db(chunk_size=500)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.ok, result.reason
    assert result.count == EVENTS
    return peak


def test_verify_memory_does_not_grow_with_the_number_of_client_addresses(monkeypatch):
    _seed(monkeypatch, distinct=DISTINCT)
    peak = _peak()
    print(f"verify peak with {EVENTS} distinct addresses: {peak / 2**20:.1f} MiB")

    # 500 rows a fetch take well under 1 MiB; a cache of 30k addresses takes several.
    assert peak < 2 * 2**20, f"peak {peak / 2**20:.1f} MiB for {EVENTS} rows"
