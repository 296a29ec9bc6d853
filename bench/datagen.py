"""Shared parts of the benchmarks: a scratch Postgres database and generated rows.

The rows are made inside Postgres (``INSERT ... SELECT generate_series``, seeded random), so
millions take seconds to minutes, not hours of ORM calls.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from urllib.parse import urlsplit, urlunsplit

APPROVALS_PER_RUN = 4
SPAN_DAYS = 180
REVIEWERS = 20
AGENTS = ("incident_copilot", "refund_agent", "billing_helper", "deploy_bot", "support_triage")
# (tool, tier): eight tools over three tiers.
TOOLS = (
    ("refund_order", "write"),
    ("create_incident_ticket", "write"),
    ("rollback_deploy", "critical"),
    ("notify_customer", "write"),
    ("restock_item", "write"),
    ("delete_account", "critical"),
    ("read_metrics", "read"),
    ("page_oncall", "critical"),
)


def database_prepare(
    url: str,
    *,
    rows: int,
    fresh: bool,
    table: str = "approvals_approvalrequest",
    at_least: bool = False,
) -> bool:
    """Create the scratch database if needed; True when its rows must be generated (``table``
    does not hold exactly ``rows``, or with ``at_least`` fewer: exports append events)."""
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    maintenance = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(maintenance, autocommit=True) as admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if exists and not fresh:
            try:
                with psycopg.connect(url) as conn:
                    count = conn.execute(
                        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
                    ).fetchone()
                if count and (count[0] >= rows if at_least else count[0] == rows):
                    return False
            except psycopg.Error:
                pass  # no tables yet
        if exists:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return True


def column_defaults(model, explicit: dict[str, str]) -> tuple[list[str], list[str], list]:
    """Columns of ``model``: explicit SQL expressions, every other field at its default."""
    from django.db import connection
    from django.db.models import AutoField

    columns, expressions, params = [], [], []
    for field in model._meta.concrete_fields:
        if isinstance(field, AutoField) and field.column not in explicit:
            continue  # the database numbers it
        columns.append(field.column)
        if field.column in explicit:
            expressions.append(explicit[field.column])
        else:
            expressions.append("%s")
            params.append(_default_prep(field, connection))
    return columns, expressions, params


def _default_prep(field, connection):
    """The field's default as the database takes it. A sealed field refuses a plain value (it
    seals under its run's key on save()); the generated rows' sealed columns hold their empty
    default unsealed, which nothing a benchmark measures reads."""
    from core.sealed_fields import SealedJSONField, SealedTextField

    if isinstance(field, SealedJSONField):
        return connection.ops.adapt_json_value(field.get_default(), field.encoder)
    if isinstance(field, SealedTextField):
        return field.get_default()
    return field.get_db_prep_save(field.get_default(), connection)


@contextlib.contextmanager
def load_fast(cursor, tables: tuple[str, ...], *, defer_indexes: bool = True):
    """A bulk load into ``tables`` (Postgres, inside the caller's transaction): foreign-key and
    other triggers off (``session_replication_role = replica``: the generated rows are
    consistent by construction, and Django's deferred FK checks would queue one trigger event
    per row until COMMIT), and with ``defer_indexes`` every index that backs no constraint
    dropped first and built again after the load (one sort per index instead of one insert per
    row and index), with a large ``maintenance_work_mem``."""
    cursor.execute("SET LOCAL session_replication_role = replica")
    cursor.execute("SET LOCAL maintenance_work_mem = '1GB'")
    definitions: list[tuple[str, str]] = []
    if defer_indexes:
        cursor.execute(
            "SELECT i.indexrelid::regclass::text, pg_get_indexdef(i.indexrelid) FROM pg_index i "
            "WHERE i.indrelid::regclass::text = ANY(%s) AND NOT EXISTS "
            "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)",
            [list(tables)],
        )
        definitions = cursor.fetchall()
        for name, _ in definitions:
            cursor.execute(f'DROP INDEX "{name}"')
    yield
    started = time.perf_counter()
    for _, definition in definitions:
        cursor.execute(definition)
    cursor.execute("SET LOCAL session_replication_role = DEFAULT")
    if definitions:
        print(f"  {len(definitions)} indexes built in {time.perf_counter() - started:.1f} s")


def approvals_generate(*, rows: int) -> None:
    """``rows`` approvals (and a run per APPROVALS_PER_RUN of them) over SPAN_DAYS days, in the
    database Django is connected to, inside one transaction."""
    from django.contrib.auth.models import User
    from django.db import connection, transaction

    from approvals.models import AgentRun, ApprovalRequest

    requester = User.objects.create_user("requester", password="bench")
    reviewer_ids = [
        User.objects.create_user(f"reviewer{n:02d}", password="bench").pk
        for n in range(1, REVIEWERS + 1)
    ]
    runs = max(1, rows // APPROVALS_PER_RUN)
    agents_sql = "ARRAY[" + ", ".join(f"'{a}'" for a in AGENTS) + "]"
    run_columns, run_values, run_params = column_defaults(
        AgentRun,
        {
            "id": "md5('run' || i)::uuid",
            "thread_id": "md5('run' || i)::uuid::text",
            "agent": f"({agents_sql})[1 + i %% {len(AGENTS)}]",  # %% : the SQL has params
            "graph_version": "'1'",
            "status": (
                "CASE WHEN r < 0.80 THEN 'completed' WHEN r < 0.86 THEN 'failed' "
                "WHEN r < 0.89 THEN 'cancelled' WHEN r < 0.91 THEN 'dead' "
                "WHEN r < 0.98 THEN 'waiting' ELSE 'queued' END"
            ),
            "requested_by_id": str(requester.pk),
            "created_at": "created_at",
            "updated_at": "created_at",
        },
    )
    run_sql = (
        f"INSERT INTO {AgentRun._meta.db_table} ({', '.join(run_columns)}) "
        f"SELECT {', '.join(run_values)} FROM ("
        "SELECT i, random() AS r, "
        f"now() - interval '{SPAN_DAYS} days' "
        f"+ (i::float8 / {runs}) * interval '{SPAN_DAYS} days' AS created_at "
        f"FROM generate_series(1, {runs}) AS i) AS src"
    )

    tools_sql = "ARRAY[" + ", ".join(f"'{t}'" for t, _ in TOOLS) + "]"
    tiers_sql = "ARRAY[" + ", ".join(f"'{t}'" for _, t in TOOLS) + "]"
    reviewers_sql = "ARRAY[" + ", ".join(str(pk) for pk in reviewer_ids) + "]"
    approval_columns, approval_values, approval_params = column_defaults(
        ApprovalRequest,
        {
            "run_id": f"md5('run' || ((i - 1) / {APPROVALS_PER_RUN} + 1))::uuid",
            "interrupt_id": "'i' || i",
            "tool": f"({tools_sql})[tool_no]",
            "tier": f"({tiers_sql})[tool_no]",
            "payload_hash": "repeat('0', 64)",
            "status": "status",
            "decided_by_id": (
                f"CASE WHEN status IN ('pending', 'expired') THEN NULL "
                f"ELSE ({reviewers_sql})[reviewer_no] END"
            ),
            "decided_by_label": (
                "CASE WHEN status = 'pending' THEN '' WHEN status = 'expired' "
                "THEN 'system:timeout' ELSE 'reviewer' || lpad(reviewer_no::text, 2, '0') END"
            ),
            "decided_at": (
                "CASE WHEN status = 'pending' THEN NULL WHEN status = 'expired' "
                "THEN created_at + interval '1 day' "
                "ELSE created_at + make_interval(secs => -ln(1 - r_time) "
                "* CASE WHEN reviewer_no = 1 THEN 3 ELSE 180 END) END"
            ),
            "expires_at": "created_at + interval '1 day'",
            "created_at": "created_at",
            "escalated_at": "CASE WHEN r_flag < 0.05 THEN created_at + interval '1 hour' END",
            "reminded_at": "CASE WHEN r_flag < 0.15 THEN created_at + interval '20 hours' END",
        },
    )
    # Reviewer 01 rubber-stamps: approves everything, in about 3 s (the fatigue signal).
    approval_sql = (
        "WITH src AS MATERIALIZED ("
        "SELECT i, random() AS r_status, random() AS r_time, random() AS r_flag, "
        f"1 + floor(random() * {len(TOOLS)})::int AS tool_no, "
        f"1 + floor(random() * {REVIEWERS})::int AS reviewer_no, "
        f"now() - interval '{SPAN_DAYS} days' + ((i - 1)::float8 / {rows}) "
        f"* interval '{SPAN_DAYS} days' + random() * interval '1 minute' AS created_at "
        f"FROM generate_series(1, {rows}) AS i), "
        "decided AS (SELECT *, CASE "
        "WHEN created_at > now() - interval '1 day' AND r_status < 0.3 THEN 'pending' "
        "WHEN r_status >= 0.92 THEN 'expired' WHEN reviewer_no = 1 THEN 'approved' "
        "WHEN r_status < 0.70 THEN 'approved' WHEN r_status < 0.78 THEN 'edited' "
        "WHEN r_status < 0.88 THEN 'rejected' ELSE 'responded' END AS status FROM src) "
        f"INSERT INTO {ApprovalRequest._meta.db_table} ({', '.join(approval_columns)}) "
        f"SELECT {', '.join(approval_values)} FROM decided ORDER BY i"
    )
    tables = (AgentRun._meta.db_table, ApprovalRequest._meta.db_table)
    with transaction.atomic(), connection.cursor() as cursor, load_fast(cursor, tables):
        cursor.execute("SELECT setseed(0.42)")
        started = time.perf_counter()
        cursor.execute(run_sql, run_params)
        print(f"  {runs:,} runs in {time.perf_counter() - started:.1f} s", flush=True)
        started = time.perf_counter()
        cursor.execute(approval_sql, approval_params)
        print(f"  {rows:,} approvals in {time.perf_counter() - started:.1f} s", flush=True)


AUDIT_ACTIONS = (
    ("run.created", ""),
    ("approval.requested", "refund_order"),
    ("approval.decided", "refund_order"),
    ("effect.completed", "refund_order"),
    ("run.completed", ""),
)


def audit_generate(*, rows: int, batch: int = 50_000) -> None:
    """Append ``rows`` audit events that form a valid chain (version 2: each row's canonical
    text is the RFC 8785 text of its columns, hashed onto the previous hash), continuing the
    chain's head, in the database Django is connected to (Postgres: COPY in batches).

    The texts are written from templates, not by record_text(): every value is a plain ASCII
    string without escapes or an integer, so the template is exactly RFC 8785 (keys in
    order), and 20M rows take minutes instead of hours. bench/export.py verifies them."""
    import datetime as dt
    import hashlib

    from django.db import connection, transaction

    from audit.models import AuditEvent
    from audit.services import GENESIS_HASH

    names = (
        "seq", "at", "actor", "actor_user_id", "actor_username", "action", "run_id",
        "approval_id", "tool", "data", "ip", "user_agent", "prev_hash", "hash",
        "chain_version", "canonical",
    )  # fmt: skip
    columns = ", ".join(AuditEvent._meta.get_field(n).column for n in names)
    head = AuditEvent.objects.order_by("-seq").values_list("seq", "hash").first()
    seq, prev = head if head else (0, GENESIS_HASH)
    sha256 = hashlib.sha256
    at = dt.datetime.now(dt.UTC) - dt.timedelta(days=SPAN_DAYS)
    step = dt.timedelta(seconds=SPAN_DAYS * 86400 / max(rows, 1))
    done = 0
    # Indexes are dropped and rebuilt only when the load at least doubles the table (an export
    # benchmark appending a few rows to a big chain keeps them).
    defer = rows >= AuditEvent.objects.count()
    table = (AuditEvent._meta.db_table,)
    with (
        transaction.atomic(),
        connection.cursor() as cursor,
        load_fast(cursor, table, defer_indexes=defer),
    ):
        while done < rows:
            lines = []
            for _ in range(min(batch, rows - done)):
                seq += 1
                done += 1
                at += step
                action, tool = AUDIT_ACTIONS[seq % len(AUDIT_ACTIONS)]
                reviewer = 1 + seq % REVIEWERS
                user = action == "approval.decided"
                actor = f"user:{reviewer}" if user else "agent:bench"
                username = f"reviewer{reviewer:02d}" if user else ""
                approval = seq // 2 if tool else None
                run_no = seq // len(AUDIT_ACTIONS)
                run = f"{run_no:08x}-0000-4000-8000-{run_no:012x}"
                ip = f"10.0.{seq % 250}.{1 + seq % 200}" if user else None
                agent = "bench/1.0" if user else ""
                data = f'{{"n":{seq},"note":"generated","step":{seq % 7}}}'
                stamp = at.isoformat()
                approval_json = "null" if approval is None else str(approval)
                text = (
                    f'{{"action":"{action}","actor":"{actor}",'
                    f'"actor_user_id":{reviewer if user else "null"},'
                    f'"actor_username":"{username}","approval_id":{approval_json},'
                    f'"at":"{stamp}","chain_version":2,"data":{data},'
                    f'"ip":{f"{chr(34)}{ip}{chr(34)}" if ip else "null"},"run_id":"{run}",'
                    f'"seq":{seq},"tool":"{tool}","user_agent":"{agent}"}}'
                )
                digest = sha256((prev + text).encode()).hexdigest()
                null = "\\N"
                lines.append(
                    f"{seq}\t{stamp}\t{actor}\t{reviewer if user else null}\t{username}\t"
                    f"{action}\t{run}\t{null if approval is None else approval}\t{tool}\t"
                    f"{data}\t{ip or null}\t{agent}\t{prev}\t{digest}\t2\t{text}\n"
                )
                prev = digest
            with cursor.cursor.copy(
                f"COPY {AuditEvent._meta.db_table} ({columns}) FROM STDIN"
            ) as copy:
                copy.write("".join(lines).encode())
            if done % 2_000_000 < batch:
                print(f"  {done:,} audit events", flush=True)


def tables_analyze() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE approvals_agentrun")
        cursor.execute("VACUUM ANALYZE approvals_approvalrequest")


def timed(function, *, repeat: int) -> tuple[float, float]:
    """(median, max) seconds over ``repeat`` calls after one warm-up call."""
    function()
    samples = []
    for _ in range(repeat):
        started = time.perf_counter()
        function()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), max(samples)
