"""One line per figure, beside the floor or anchor measured in the same run, as a ratio.

Every benchmark prints through ``figure()`` so ``make bench`` reads as one table:

    figure("metrics page, 30 days, 1M approvals", 12.3, "ms", anchor=("admin changelist", 1188.0),
           goal="<= 50 ms")
"""

from __future__ import annotations

_WIDTH = 58


def figure(
    name: str,
    value: float,
    unit: str,
    *,
    anchor: tuple[str, float] | None = None,
    goal: str = "",
) -> str:
    """Print (and return) ``name: value unit  [x ratio of anchor (anchor value)]  goal``."""
    line = f"  {name:<{_WIDTH}} {_number(value):>9} {unit:<6}"
    if anchor is not None:
        label, anchor_value = anchor
        ratio = value / anchor_value if anchor_value else float("inf")
        line += f"  {ratio:7.2f} x {label} ({_number(anchor_value)} {unit})"
    if goal:
        line += f"  goal {goal}"
    print(line, flush=True)
    return line


def section(title: str) -> None:
    print(f"\n{title}", flush=True)


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def setups_each(*, script: str, setups: tuple[str, ...], variable: str, measure) -> int:
    """Run ``measure(name)`` for each setup named in BENCH_SETUPS (default: all), each in its
    own process (Django reads its settings, database and broker once), via ``variable``."""
    import os
    import subprocess
    import sys

    setup = os.environ.get(variable)
    if setup:
        return measure(setup)
    chosen = [name.strip() for name in os.environ.get("BENCH_SETUPS", ",".join(setups)).split(",")]
    unknown = set(chosen) - set(setups)
    if unknown:
        print(f"BENCH_SETUPS: unknown {sorted(unknown)}; choose from {', '.join(setups)}")
        return 2
    failed = 0
    for name in chosen:
        child = subprocess.run([sys.executable, script], env={**os.environ, variable: name})
        failed += child.returncode != 0
    return 1 if failed else 0
