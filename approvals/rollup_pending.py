"""Pending approvals per UTC creation day, tier, tool and agent, kept by the database.

The metrics page shows, for the window and for the queue now, how many approvals are still
pending per tier, tool and agent (the run's), and how many of them were escalated or reminded.
Counted live, that reads every pending approval and probes its run for the agent (16.5k of
them at 10M approvals: ~300 ms). Instead, like the runs by status (approvals/rollup_runs.py),
triggers on ``approvals_approvalrequest`` append a row to PendingApprovalDelta whenever an
approval enters or leaves a pending cell (inserted or deleted while pending, decided, expired,
cancelled, its tier edited, escalated, reminded), in the changing transaction: an append waits
on no other transaction, and no code path can forget it. The trigger reads the run's agent by
its primary key (runs are PROTECTed while they have approvals, and a run's agent never changes).

``pending_compact()`` (every minute, django-q2 Schedule from migration 0018) folds the deltas
into PendingApprovalCount and drops the cells that reached zero; ``pending_cells()`` sums both
tables in one statement. ``pending_rebuild()`` (``manage.py metrics_backfill``, migration 0018,
and after a SQLite table remake dropped the triggers) counts them again from the approvals.
"""

from __future__ import annotations

from django.db import connection, transaction

from approvals.models import AgentRun, ApprovalRequest
from approvals.rollup_models import PendingApprovalCount, PendingApprovalDelta
from approvals.rollup_runs import _postgres_day, _sqlite_day, deltas_compact

APPROVALS = ApprovalRequest._meta.db_table
RUNS = AgentRun._meta.db_table
COUNTS = PendingApprovalCount._meta.db_table
DELTAS = PendingApprovalDelta._meta.db_table
PENDING = ApprovalRequest.Status.PENDING.value
KEYS = "day, tier, tool, agent"
# (day, tier, tool, agent, n, escalated, reminded)
PendingCell = tuple[int, str, str, str, int, int, int]
_COMPACT_LOCK = 0x70656E64  # "pend": one compactor at a time, another skips
# An update that can move an approval into, out of or between cells (OLD/NEW rows).
_CHANGED = {
    "postgresql": (
        f"(OLD.status = '{PENDING}' OR NEW.status = '{PENDING}') AND ("
        "OLD.status IS DISTINCT FROM NEW.status OR OLD.created_at IS DISTINCT FROM NEW.created_at "
        "OR OLD.tier IS DISTINCT FROM NEW.tier OR OLD.tool IS DISTINCT FROM NEW.tool "
        "OR OLD.run_id IS DISTINCT FROM NEW.run_id "
        "OR (OLD.escalated_at IS NULL) <> (NEW.escalated_at IS NULL) "
        "OR (OLD.reminded_at IS NULL) <> (NEW.reminded_at IS NULL))"
    ),
    "sqlite": (
        f"(OLD.status = '{PENDING}' OR NEW.status = '{PENDING}') AND ("
        "OLD.status IS NOT NEW.status OR OLD.created_at IS NOT NEW.created_at "
        "OR OLD.tier IS NOT NEW.tier OR OLD.tool IS NOT NEW.tool OR OLD.run_id IS NOT NEW.run_id "
        "OR (OLD.escalated_at IS NULL) <> (NEW.escalated_at IS NULL) "
        "OR (OLD.reminded_at IS NULL) <> (NEW.reminded_at IS NULL))"
    ),
}
_COLUMNS = "status, created_at, tier, tool, run_id, escalated_at, reminded_at"
# SQLite only: on the runs table, gives the deltas of a deleted run its agent (triggers_sql).
_RUN_DELETE = "pending_delta_run_delete"


def _cell(vendor: str, row: str, sign: int) -> str:
    """The values of one delta row: ``row``'s cell and ``sign`` x (1, escalated?, reminded?).

    Postgres reads the run's agent here. SQLite stores the run id and leaves the agent null
    (see PendingApprovalDelta): a SQLite trigger that names approvals_agentrun makes Django's
    remake of that table fail (its RENAME checks every trigger while the old table is gone)."""
    day = _postgres_day(row) if vendor == "postgresql" else _sqlite_day(row)
    flag = "({} IS NOT NULL)::integer" if vendor == "postgresql" else "({} IS NOT NULL)"
    escalated, reminded = flag.format(f"{row}.escalated_at"), flag.format(f"{row}.reminded_at")
    sign_text = "-" if sign < 0 else ""
    if vendor == "postgresql":
        whose = f"COALESCE((SELECT agent FROM {RUNS} WHERE id = {row}.run_id), ''), ''"
    else:
        whose = f"NULL, {row}.run_id"
    return (
        f"{day}, {row}.tier, {row}.tool, {whose}, "
        f"{sign}, {sign_text}{escalated}, {sign_text}{reminded}"
    )


def _deltas(where: str = "") -> str:
    """The deltas with their agent: SQLite reads it from the run now (see _cell)."""
    if connection.vendor == "postgresql":
        return f"SELECT {KEYS}, n, escalated, reminded FROM {DELTAS} {where}"
    return (
        f"SELECT d.day, d.tier, d.tool, COALESCE(d.agent, r.agent, '') AS agent, d.n, "
        f"d.escalated, d.reminded FROM {DELTAS} AS d LEFT JOIN {RUNS} AS r ON r.id = d.run_id "
        f"{where}"
    )


def triggers_sql(vendor: str) -> list[str]:
    """The statements that install the triggers (and their Postgres function)."""
    insert = f"INSERT INTO {DELTAS} ({KEYS}, run_id, n, escalated, reminded)"
    if vendor == "postgresql":
        same_cell = (
            f"OLD.status = '{PENDING}' AND NEW.status = '{PENDING}' AND OLD.tier = NEW.tier "
            f"AND OLD.tool = NEW.tool AND OLD.run_id = NEW.run_id "
            f"AND {_postgres_day('OLD')} = {_postgres_day('NEW')}"
        )
        return [
            f"""CREATE OR REPLACE FUNCTION approvals_pending_delta() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                IF TG_OP = 'UPDATE' AND {same_cell} THEN
                    -- escalated or reminded in place (the sweep): one row, not two
                    {insert} VALUES ({_postgres_day("NEW")}, NEW.tier, NEW.tool,
                        COALESCE((SELECT agent FROM {RUNS} WHERE id = NEW.run_id), ''), '', 0,
                        (NEW.escalated_at IS NOT NULL)::integer
                            - (OLD.escalated_at IS NOT NULL)::integer,
                        (NEW.reminded_at IS NOT NULL)::integer
                            - (OLD.reminded_at IS NOT NULL)::integer);
                    RETURN NULL;
                END IF;
                IF TG_OP <> 'INSERT' AND OLD.status = '{PENDING}' THEN
                    {insert} VALUES ({_cell(vendor, "OLD", -1)});
                END IF;
                IF TG_OP <> 'DELETE' AND NEW.status = '{PENDING}' THEN
                    {insert} VALUES ({_cell(vendor, "NEW", 1)});
                END IF;
                RETURN NULL;
            END $$""",
            f"CREATE TRIGGER pending_delta_insert AFTER INSERT ON {APPROVALS} FOR EACH ROW "
            f"WHEN (NEW.status = '{PENDING}') EXECUTE FUNCTION approvals_pending_delta()",
            f"CREATE TRIGGER pending_delta_delete AFTER DELETE ON {APPROVALS} FOR EACH ROW "
            f"WHEN (OLD.status = '{PENDING}') EXECUTE FUNCTION approvals_pending_delta()",
            f"CREATE TRIGGER pending_delta_update AFTER UPDATE OF {_COLUMNS} ON {APPROVALS} "
            f"FOR EACH ROW WHEN ({_CHANGED[vendor]}) EXECUTE FUNCTION approvals_pending_delta()",
        ]
    return [
        f"CREATE TRIGGER pending_delta_insert AFTER INSERT ON {APPROVALS} "
        f"WHEN NEW.status = '{PENDING}' BEGIN {insert} VALUES ({_cell(vendor, 'NEW', 1)}); END",
        f"CREATE TRIGGER pending_delta_delete AFTER DELETE ON {APPROVALS} "
        f"WHEN OLD.status = '{PENDING}' BEGIN {insert} VALUES ({_cell(vendor, 'OLD', -1)}); END",
        f"CREATE TRIGGER pending_delta_update AFTER UPDATE OF {_COLUMNS} ON {APPROVALS} "
        f"WHEN {_CHANGED[vendor]} BEGIN "
        f"{insert} SELECT {_cell(vendor, 'OLD', -1)} WHERE OLD.status = '{PENDING}'; "
        f"{insert} SELECT {_cell(vendor, 'NEW', 1)} WHERE NEW.status = '{PENDING}'; END",
        # A run deleted before its approvals' deltas are folded (it goes after them: PROTECT)
        # would leave them no agent to find: they take it now. A trigger on the runs table goes
        # with it in a remake, so naming it there cannot break one (pending_triggers_ensure).
        f"CREATE TRIGGER {_RUN_DELETE} BEFORE DELETE ON {RUNS} BEGIN "
        f"UPDATE {DELTAS} SET agent = OLD.agent WHERE run_id = OLD.id AND agent IS NULL; END",
    ]


def triggers_drop_sql(vendor: str) -> list[str]:
    names = ("pending_delta_insert", "pending_delta_delete", "pending_delta_update")
    if vendor == "postgresql":
        return [f"DROP TRIGGER IF EXISTS {name} ON {APPROVALS}" for name in names] + [
            "DROP FUNCTION IF EXISTS approvals_pending_delta()"
        ]
    return [f"DROP TRIGGER IF EXISTS {name}" for name in (*names, _RUN_DELETE)]


TRIGGERS = {"pending_delta_insert", "pending_delta_delete", "pending_delta_update"}


def pending_compact() -> bool:
    """Fold the deltas into the counts and drop the cells now empty; False when another
    compaction holds the lock (rollup_runs.deltas_compact)."""
    fold = (
        f"INSERT INTO {COUNTS} ({KEYS}, n, escalated, reminded) "
        f"SELECT {KEYS}, SUM(n), SUM(escalated), SUM(reminded) FROM {{source}} "
        f"GROUP BY {KEYS} ORDER BY {KEYS} ON CONFLICT ({KEYS}) DO UPDATE SET "
        f"n = {COUNTS}.n + excluded.n, escalated = {COUNTS}.escalated + excluded.escalated, "
        f"reminded = {COUNTS}.reminded + excluded.reminded"
    )
    # An empty cell (n = 0 implies no escalated or reminded ones) sums to nothing anyway.
    empty = f"DELETE FROM {COUNTS} WHERE n = 0 AND escalated = 0 AND reminded = 0"
    return deltas_compact(
        deltas=DELTAS,
        lock=_COMPACT_LOCK,
        fold=fold,
        columns=f"{KEYS}, n, escalated, reminded",
        upto=lambda highest: f"({_deltas(f'WHERE d.id <= {highest}')}) WHERE true",
        then=(empty,),
    )


def pending_cells() -> list[PendingCell]:
    """Every non-empty cell (day, tier, tool, agent, n, escalated, reminded): one query over
    the counts and the deltas not yet folded (both small: one row per cell with pending)."""
    columns = f"{KEYS}, n, escalated, reminded"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {KEYS}, SUM(n), SUM(escalated), SUM(reminded) FROM ("
            f"SELECT {columns} FROM {COUNTS} UNION ALL {_deltas()}) AS u "
            f"GROUP BY {KEYS} HAVING SUM(n) <> 0 OR SUM(escalated) <> 0 OR SUM(reminded) <> 0"
        )
        return [
            (int(day), tier, tool, agent, int(n), int(escalated), int(reminded))
            for day, tier, tool, agent, n, escalated, reminded in cursor.fetchall()
        ]


def pending_rebuild() -> None:
    """Count the pending approvals again (inside the caller's transaction; on Postgres the
    approvals are locked against writes meanwhile, so no change is missed or counted twice)."""
    vendor = connection.vendor
    day = _postgres_day("a") if vendor == "postgresql" else _sqlite_day("a")
    with connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute(f"LOCK TABLE {APPROVALS} IN SHARE MODE")
        cursor.execute(f"DELETE FROM {DELTAS}")
        cursor.execute(f"DELETE FROM {COUNTS}")
        cursor.execute(
            f"INSERT INTO {COUNTS} ({KEYS}, n, escalated, reminded) "
            f"SELECT {day}, a.tier, a.tool, COALESCE(r.agent, ''), COUNT(*), "
            f"COUNT(a.escalated_at), COUNT(a.reminded_at) FROM {APPROVALS} AS a "
            f"LEFT JOIN {RUNS} AS r ON r.id = a.run_id WHERE a.status = %s GROUP BY 1, 2, 3, 4",
            [PENDING],
        )


def pending_triggers_ensure() -> bool:
    """After every ``migrate`` (post_migrate, approvals/apps.py): put the triggers back if a
    migration dropped them (SQLite remakes a table to alter most columns, and its triggers go
    with it; see run_status_triggers_ensure), then count the pending approvals again. True when
    the triggers had to be put back.

    On SQLite the count runs every time, not only after a repair: ``flush`` (every
    transactional test) also ends in post_migrate, and its ``DELETE FROM`` each table, in no
    fixed order, can leave the deltas of the approvals it deleted behind (Postgres truncates:
    no trigger fires). Counting again is one GROUP BY over the pending approvals."""
    vendor = connection.vendor
    tables = connection.introspection.table_names()
    if vendor not in ("postgresql", "sqlite") or DELTAS not in tables:
        return False  # migrated back below 0018: nothing to keep
    with transaction.atomic(), connection.cursor() as cursor:
        if vendor == "postgresql":
            cursor.execute(
                "SELECT tgname FROM pg_trigger WHERE tgrelid = %s::regclass AND NOT tgisinternal",
                [APPROVALS],
            )
        else:
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name IN (%s, %s)",
                [APPROVALS, RUNS],
            )
        expected = TRIGGERS if vendor == "postgresql" else TRIGGERS | {_RUN_DELETE}
        missing = not {name for (name,) in cursor.fetchall()} >= expected
        if missing:
            for statement in triggers_drop_sql(vendor) + triggers_sql(vendor):
                cursor.execute(statement)
    if missing or vendor == "sqlite":
        with transaction.atomic():
            pending_rebuild()
    return missing
