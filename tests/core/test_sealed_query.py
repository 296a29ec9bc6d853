"""Lists open their sealed values after one key query (core/sealed_query.py), and key scopes
nest (core/sealing.py)."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from approvals.models import AgentRun, ApprovalRequest
from core.models import DataKey
from core.sealing import datakey_scope, datakeys_destroy, is_erased, seal, unseal
from tests.support.factories import ApprovalFactory, RunFactory

pytestmark = pytest.mark.django_db


def _key_queries(queries: CaptureQueriesContext) -> int:
    return sum(DataKey._meta.db_table in q["sql"] for q in queries.captured_queries)


def test_a_list_of_many_runs_reads_their_keys_in_one_query(alice):
    runs = [RunFactory(requested_by=alice, input={"n": i}) for i in range(5)]
    for run in runs:
        ApprovalFactory(run=run, args={"order_id": f"A-{run.input['n']}", "amount": 1})
    with CaptureQueriesContext(connection) as queries:
        rows = list(ApprovalRequest.objects.select_related("run").order_by("id"))
    assert len(queries) == 2 and _key_queries(queries) == 1  # the page, then the keys
    assert [row.run.input["n"] for row in rows] == list(range(5))  # related rows opened too
    assert [row.args["order_id"] for row in rows] == [f"A-{i}" for i in range(5)]


def test_iterating_in_chunks_reads_the_keys_once_per_chunk(alice):
    for i in range(5):
        RunFactory(requested_by=alice, input={"n": i})
    with CaptureQueriesContext(connection) as queries:
        seen = [run.input["n"] for run in AgentRun.objects.order_by("created_at").iterator(2)]
    assert sorted(seen) == list(range(5))
    assert _key_queries(queries) == 3  # chunks of 2, 2 and 1


def test_a_list_shows_an_erased_run_as_erased_next_to_the_others(alice):
    kept, gone = RunFactory(requested_by=alice, input={"a": 1}), RunFactory(requested_by=alice)
    datakeys_destroy([gone.pk])
    rows = {run.pk: run for run in AgentRun.objects.all()}
    assert rows[kept.pk].input == {"a": 1} and is_erased(rows[gone.pk].input)


def test_a_list_in_a_scope_that_holds_the_keys_reads_none(alice):
    run = RunFactory(requested_by=alice, input={"a": 1})
    with datakey_scope():
        AgentRun.objects.get(pk=run.pk)
        with CaptureQueriesContext(connection) as queries:
            assert list(AgentRun.objects.all())[0].input == {"a": 1}
    assert _key_queries(queries) == 0


def test_an_inner_scope_uses_the_outer_cache():
    run = uuid.uuid4()
    sealed = seal(run, {"x": 1}, label="x")
    with datakey_scope():
        with datakey_scope():
            unseal(sealed, label="x")
        with CaptureQueriesContext(connection) as queries:
            assert unseal(sealed, label="x") == {"x": 1}
    assert len(queries) == 0


def test_a_new_run_makes_its_key_once_for_all_its_sealed_fields(alice):
    with datakey_scope(), CaptureQueriesContext(connection) as queries:
        RunFactory(requested_by=alice, input={"a": 1}, output={"b": 2}, error="boom")
    assert _key_queries(queries) == 1  # one insert; the other fields use the key it made
