"""A run's error as its readers see it: the stored text starts with "Type: message" and may go
on with the traceback (agents/runtime/failures.py), whose frames only admins read."""

from __future__ import annotations

TRACEBACK_START = "Traceback (most recent call last):"
ERROR_SUMMARY_MAX = 300


def error_summary(error: str) -> str:
    """One line of a run's error: the exception's type and message, never the frames (file
    paths, code) of the traceback stored after it, which only admins read."""
    head, _, traceback = error.partition(TRACEBACK_START)
    if head.strip():
        line = head.strip().splitlines()[0]
    else:  # a bare traceback: its last unindented line is "Type: message"
        lines = [ln for ln in traceback.splitlines() if ln.strip() and not ln[0].isspace()]
        line = lines[-1].strip() if lines else ""
    return line if len(line) <= ERROR_SUMMARY_MAX else line[: ERROR_SUMMARY_MAX - 1] + "…"
