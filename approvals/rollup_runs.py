"""Runs by status per UTC creation day, kept by the database (the metrics page's run counts).

A live ``COUNT ... GROUP BY status`` over the window's runs grows with the runs (2.5M at 10M
approvals: a few hundred ms for a year). Instead, triggers on ``approvals_agentrun`` append one
row to RunStatusDelta per change (+1 for the new status of an inserted or updated run, -1 for
the old one of an updated or deleted run), keyed by the run's UTC creation day. Appends take no
lock another transaction waits on, so the write path gains no contention and no deadlock, and
a run's change and its delta commit or roll back together (no code path can forget one).

``run_status_compact()`` (every minute, django-q2 Schedule from migration 0017) folds the deltas
into RunStatusCount (one row per day and status) in one statement; a reader sums both tables in
one statement, so it sees a delta either before or after a compaction, never twice or not at
all. ``run_status_rebuild()`` (``manage.py metrics_backfill``) counts them again from the runs.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection, transaction

from approvals.models import AgentRun
from approvals.rollup_models import RunStatusCount, RunStatusDelta

RUNS = AgentRun._meta.db_table
COUNTS = RunStatusCount._meta.db_table
DELTAS = RunStatusDelta._meta.db_table
# pg_try_advisory_xact_lock key of the compaction (one compactor at a time; another skips).
_COMPACT_LOCK = 0x72756E73  # "runs"


def _postgres_day(row: str) -> str:
    return f"floor(extract(epoch FROM {row}.created_at) / 86400)::integer"


def _sqlite_day(row: str) -> str:
    # Django stores SQLite datetimes as UTC text "YYYY-MM-DD HH:MM:SS[.ffffff]": the date part
    # alone (strftime('%s') would round 23:59:59.9995 up into the next day).
    return f"CAST(julianday(substr({row}.created_at, 1, 10)) - 2440587.5 AS INTEGER)"


def triggers_sql(vendor: str) -> list[str]:
    """The statements that install the triggers (and their Postgres function)."""
    insert = f"INSERT INTO {DELTAS} (day, status, n) VALUES "
    if vendor == "postgresql":
        return [
            f"""CREATE OR REPLACE FUNCTION approvals_run_status_delta() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'INSERT' THEN
                    {insert}({_postgres_day("NEW")}, NEW.status, 1);
                ELSIF TG_OP = 'DELETE' THEN
                    {insert}({_postgres_day("OLD")}, OLD.status, -1);
                ELSE
                    {insert}({_postgres_day("OLD")}, OLD.status, -1),
                        ({_postgres_day("NEW")}, NEW.status, 1);
                END IF;
                RETURN NULL;
            END $$""",
            f"CREATE TRIGGER run_status_delta_insert_delete AFTER INSERT OR DELETE ON {RUNS} "
            "FOR EACH ROW EXECUTE FUNCTION approvals_run_status_delta()",
            f"CREATE TRIGGER run_status_delta_update AFTER UPDATE OF status, created_at ON {RUNS} "
            "FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status "
            "OR OLD.created_at IS DISTINCT FROM NEW.created_at) "
            "EXECUTE FUNCTION approvals_run_status_delta()",
        ]
    return [
        f"CREATE TRIGGER run_status_delta_insert AFTER INSERT ON {RUNS} BEGIN "
        f"{insert}({_sqlite_day('NEW')}, NEW.status, 1); END",
        f"CREATE TRIGGER run_status_delta_delete AFTER DELETE ON {RUNS} BEGIN "
        f"{insert}({_sqlite_day('OLD')}, OLD.status, -1); END",
        f"CREATE TRIGGER run_status_delta_update AFTER UPDATE OF status, created_at ON {RUNS} "
        "WHEN OLD.status IS NOT NEW.status OR OLD.created_at IS NOT NEW.created_at BEGIN "
        f"{insert}({_sqlite_day('OLD')}, OLD.status, -1), "
        f"({_sqlite_day('NEW')}, NEW.status, 1); END",
    ]


def triggers_drop_sql(vendor: str) -> list[str]:
    if vendor == "postgresql":
        return [
            f"DROP TRIGGER IF EXISTS run_status_delta_insert_delete ON {RUNS}",
            f"DROP TRIGGER IF EXISTS run_status_delta_update ON {RUNS}",
            "DROP FUNCTION IF EXISTS approvals_run_status_delta()",
        ]
    return [
        "DROP TRIGGER IF EXISTS run_status_delta_insert",
        "DROP TRIGGER IF EXISTS run_status_delta_delete",
        "DROP TRIGGER IF EXISTS run_status_delta_update",
    ]


def run_status_compact() -> bool:
    """Fold the deltas into the per-day counts; False when another compaction holds the lock
    (deltas_compact)."""
    fold = (
        f"INSERT INTO {COUNTS} (day, status, n) SELECT day, status, SUM(n) FROM {{source}} "
        "GROUP BY day, status ORDER BY day, status "
        f"ON CONFLICT (day, status) DO UPDATE SET n = {COUNTS}.n + excluded.n"
    )
    # WHERE: SQLite's parser needs one before ON CONFLICT in an INSERT ... SELECT.
    return deltas_compact(
        deltas=DELTAS,
        lock=_COMPACT_LOCK,
        fold=fold,
        columns="day, status, n",
        upto=lambda highest: (
            f"(SELECT day, status, n FROM {DELTAS} WHERE id <= {highest}) WHERE true"
        ),
    )


def deltas_compact(
    *,
    deltas: str,
    lock: int,
    fold: str,
    columns: str,
    upto: Callable[[int], str],
    then: tuple[str, ...] = (),
) -> bool:
    """Fold a table of trigger-written deltas into its counts (run status here, pending
    approvals in rollup_pending); False when another compaction holds ``lock``. ``fold`` is the
    upsert with ``{source}`` for the rows folded; ``then`` runs after it.

    Postgres: one statement (DELETE ... RETURNING ``columns`` feeding the upsert), so a delta
    committed meanwhile is either folded and deleted or left for the next pass. SQLite: one
    writer at a time, so the fold of the rows up to the highest id read (``upto(id)``, the
    source) and their delete are one transaction's two statements.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [lock])
            if not cursor.fetchone()[0]:
                return False
            cursor.execute(
                f"WITH gone AS (DELETE FROM {deltas} RETURNING {columns}) "
                + fold.format(source="gone")
            )
        else:
            cursor.execute(f"SELECT MAX(id) FROM {deltas}")
            (highest,) = cursor.fetchone()
            if highest is None:
                return True
            cursor.execute(fold.format(source=upto(int(highest))))
            cursor.execute(f"DELETE FROM {deltas} WHERE id <= %s", [highest])
        for statement in then:
            cursor.execute(statement)
    return True


def runs_by_status_days(*, first: int, last: int) -> dict[str, int]:
    """Runs created on UTC days ``first..last`` by their status now: one query."""
    counts = dict.fromkeys(AgentRun.Status.values, 0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT status, SUM(n) FROM (SELECT status, n FROM {COUNTS} "
            "WHERE day >= %s AND day <= %s UNION ALL "
            f"SELECT status, n FROM {DELTAS} WHERE day >= %s AND day <= %s) AS u GROUP BY status",
            [first, last, first, last],
        )
        for status, n in cursor.fetchall():
            if n:
                counts[status] = int(n)
    return counts


def run_status_rebuild() -> None:
    """Count the runs by creation day and status again (inside the caller's transaction; on
    Postgres the runs table is locked against writes meanwhile, so no change is missed or
    counted twice)."""
    day = _postgres_day(RUNS) if connection.vendor == "postgresql" else _sqlite_day(RUNS)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(f"LOCK TABLE {RUNS} IN SHARE MODE")
        cursor.execute(f"DELETE FROM {DELTAS}")
        cursor.execute(f"DELETE FROM {COUNTS}")
        cursor.execute(
            f"INSERT INTO {COUNTS} (day, status, n) SELECT {day} AS day, status, COUNT(*) "
            f"FROM {RUNS} GROUP BY 1, 2"
        )


_TRIGGERS = {
    "postgresql": {"run_status_delta_insert_delete", "run_status_delta_update"},
    "sqlite": {"run_status_delta_insert", "run_status_delta_delete", "run_status_delta_update"},
}


def _triggers_present(cursor, vendor: str) -> set[str]:
    if vendor == "postgresql":
        cursor.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
            [RUNS],
        )
    else:
        cursor.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [RUNS]
        )
    return {name for (name,) in cursor.fetchall()}


def run_status_triggers_ensure() -> bool:
    """Put the triggers back if a migration dropped them; True when it had to.

    SQLite alters most columns by remaking the table (create, copy, drop, rename), and the
    dropped table takes its triggers along; from then on status changes would go uncounted. So
    after every ``migrate`` (post_migrate, approvals/apps.py) the triggers are checked, and if
    any is missing they are installed again and the counts rebuilt from the runs."""
    vendor = connection.vendor
    if vendor not in _TRIGGERS or DELTAS not in connection.introspection.table_names():
        return False  # migrated back below 0017: nothing to keep
    with transaction.atomic(), connection.cursor() as cursor:
        if _triggers_present(cursor, vendor) >= _TRIGGERS[vendor]:
            return False
        for statement in triggers_drop_sql(vendor) + triggers_sql(vendor):
            cursor.execute(statement)
    with transaction.atomic():
        run_status_rebuild()
    return True
