"""Hypothesis profiles, chosen by ``HYPOTHESIS_PROFILE`` (tests/conftest.py loads this module).

- ``ci`` (the default): bounded and deterministic (``derandomize``), so every run of the suite
  explores the same examples and a failure reproduces as it is.
- ``soak``: many more, longer, random examples (``make soak``); a failure prints the blob to
  reproduce it with ``@reproduce_failure``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Examples talk to the database and the checkpointer: slow by hypothesis's standards.
SLOW_IS_EXPECTED = [HealthCheck.too_slow, HealthCheck.data_too_large]

settings.register_profile(
    "ci",
    max_examples=30,
    stateful_step_count=15,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=SLOW_IS_EXPECTED,
)
settings.register_profile(
    "soak",
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    print_blob=True,
    suppress_health_check=SLOW_IS_EXPECTED,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
