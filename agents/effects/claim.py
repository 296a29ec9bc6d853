"""The effect's claim, fenced in its own INSERT (invariants 1, 6 and 14).

The row goes in only if the run is not a canary (never, whatever a reviewer decided), not cancelled (unless this is a compensation) and, inside
a run, this worker still holds its live lease: the fence is the WHERE of the write, so a
fenced-out worker's claim inserts nothing, and no separate read of the run precedes it.
"""

from __future__ import annotations

import datetime as dt
import re

from django.db import connection

from agents.effects.canary import canary_is_planting, canary_refuse
from agents.models import Effect
from approvals.models import AgentRun, Canary


def _cast_type(field) -> str:
    db_type = field.db_type(connection)
    return re.sub(r"^(varchar|character varying|char|character)\(\d+\)$", "text", db_type)


def effect_insert_fenced(
    effect: Effect, *, owner: str | None, compensating: bool, now: dt.datetime
) -> bool:
    """Insert ``effect`` (unsaved) if its run passes the fence; whether it went in (its pk set).
    A key already claimed raises IntegrityError, as ``Effect.objects.create`` does."""
    if canary_is_planting(effect.run_id):  # a canary's graph before its Canary row exists
        canary_refuse(run_id=effect.run_id, approval_id=effect.approval_id)
    postgres = connection.vendor == "postgresql"
    ops = connection.ops
    fields = [f for f in Effect._meta.concrete_fields if not f.primary_key]
    values = []
    for field in fields:
        value = field.pre_save(effect, add=True)  # auto_now(_add) set here, as save() would
        values.append(field.get_db_prep_save(value, connection))
    # Postgres types the SELECT's literals as text: cast each to its column's type. SQLite has
    # column affinity (a CAST there would turn a datetime text into a number).
    # An explicit CAST to varchar(n) truncates silently: cast to the unbounded type, so the
    # column's own length check refuses an over-long value, as a plain INSERT does.
    slots = [f"CAST(%s AS {_cast_type(f)})" if postgres else "%s" for f in fields]
    runs = ops.quote_name(AgentRun._meta.db_table)
    fence = [f"r.{ops.quote_name('id')} = %s"]
    params: list = [*values, AgentRun._meta.pk.get_db_prep_value(effect.run_id, connection)]
    if not compensating:
        fence.append(f"r.{ops.quote_name('cancel_requested')} = %s")
        params.append(False)
    if owner is not None:
        fence.append(f"r.{ops.quote_name('lease_owner')} = %s")
        fence.append(f"r.{ops.quote_name('lease_expires_at')} > %s")
        params += [
            owner,
            AgentRun._meta.get_field("lease_expires_at").get_db_prep_value(now, connection),
        ]
    # A canary's run is inert by construction: no effect of it is ever claimed, compensations
    # included (agents/effects/canary.py says why and audits it).
    canaries = ops.quote_name(Canary._meta.db_table)
    canary_run = ops.quote_name(Canary._meta.get_field("run").column)
    fence.append(
        f"NOT EXISTS (SELECT 1 FROM {canaries} c WHERE c.{canary_run} = r.{ops.quote_name('id')})"
    )
    columns = ", ".join(ops.quote_name(f.column) for f in fields)
    sql = (
        f"INSERT INTO {ops.quote_name(Effect._meta.db_table)} ({columns}) "
        f"SELECT {', '.join(slots)} WHERE EXISTS "
        f"(SELECT 1 FROM {runs} r WHERE {' AND '.join(fence)}) RETURNING id"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        row = cursor.fetchone()
    if row is None:
        return False
    effect.pk = row[0]
    effect._state.adding = False
    effect._state.db = connection.alias
    return True
