"""The metrics table as CSV rows (the page's export), with spreadsheet formulas neutralised."""

from __future__ import annotations

from typing import Any

from console.metrics.definitions import OUTCOMES, PERCENTILES, MetricsReport, MetricsRow

CSV_HEADER: tuple[str, ...] = (
    "group",
    "key",
    "requests",
    "pending",
    "closed",
    *OUTCOMES,
    *(f"{name}_rate" for name in OUTCOMES),
    *(f"p{p}_seconds" for p in PERCENTILES),
    "escalated",
    "reminded",
    "queue_depth",
    "oldest_pending_age_seconds",
    "fatigue",
)


# Spreadsheet programs run cells that start with these as formulas (keys are user data).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _csv_text(value: str) -> str:
    return "'" + value if value.startswith(_FORMULA_START) else value


def report_csv_rows(report: MetricsReport) -> list[list[Any]]:
    """The table as CSV rows: a header, one line per group, then the whole window ("(all)")."""

    def line(group: str, row: MetricsRow) -> list[Any]:
        rates = row.rates
        return [
            group,
            _csv_text(row.key),
            row.requests,
            row.pending,
            row.closed,
            *(row.outcomes[name] for name in OUTCOMES),
            *("" if rates[name] is None else f"{rates[name]:.4f}" for name in OUTCOMES),
            *(
                "" if row.percentiles[p] is None else f"{row.percentiles[p]:.3f}"
                for p in PERCENTILES
            ),
            row.escalated,
            row.reminded,
            row.queue_depth,
            ""
            if row.oldest_pending_age_seconds is None
            else f"{row.oldest_pending_age_seconds:.0f}",
            "yes" if row.fatigue else "no",
        ]

    return [
        list(CSV_HEADER),
        *(line(report.group, row) for row in report.rows),
        line("(all)", report.total),
    ]
