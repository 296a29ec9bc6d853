"""A recorded task queue: ``async_task`` patched where the code enqueues, so nothing runs.

tests/conftest.py loads this module as a plugin, so any test may ask for ``queued`` (a
``MagicMock`` standing in for ``async_task``). It is not autouse; a directory whose tests must
never run a task opts in from its conftest.py::

    @pytest.fixture(autouse=True)
    def _nothing_runs(queued):  # every task these tests enqueue is recorded on it
        return queued

or, in a directory whose other tests do run their tasks, from the module itself::

    pytestmark = pytest.mark.usefixtures("queued")  # every task enqueued is recorded, none runs

A directory patches notification deliveries as well by overriding ``queue_modules``::

    @pytest.fixture
    def queue_modules():
        return (*RUNNER_MODULES, *NOTIFICATION_MODULES)
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any
from unittest import mock

import pytest

from agents import services as agent_services
from approvals import notifications
from approvals.services import autonomy_review
from approvals.services import runs as approval_runs
from approvals.services import wake as approval_wake

RUNNER_MODULES: tuple[ModuleType, ...] = (
    approval_runs,
    approval_wake,
    agent_services,
    autonomy_review,
)
"""Where run starts, decisions and cancels enqueue the run's advance (and an undo, its
compensation)."""

NOTIFICATION_MODULES: tuple[ModuleType, ...] = (notifications,)
"""Where approval notifications enqueue their delivery."""


@contextlib.contextmanager
def queue_recorded(modules: Iterable[ModuleType] = RUNNER_MODULES) -> Iterator[mock.MagicMock]:
    """Patch ``async_task`` in each of ``modules`` that has one with a single recorder."""
    recorder = mock.MagicMock(name="async_task")
    with contextlib.ExitStack() as stack:
        for module in modules:
            if hasattr(module, "async_task"):
                stack.enter_context(mock.patch.object(module, "async_task", recorder))
        yield recorder


@pytest.fixture
def queue_modules() -> tuple[ModuleType, ...]:
    """The modules whose ``async_task`` ``queued`` replaces (override it in a conftest.py)."""
    return RUNNER_MODULES


@pytest.fixture
def queued(queue_modules: tuple[ModuleType, ...]) -> Iterator[mock.MagicMock]:
    """The task queue: what the code enqueues is recorded here and nothing runs."""
    with queue_recorded(queue_modules) as recorder:
        yield recorder


def tasks_named(recorder: mock.MagicMock, name: str) -> list[tuple[Any, ...]]:
    """The arguments of each task called ``name`` that ``recorder`` received, in order."""
    return [call.args for call in recorder.call_args_list if call.args and call.args[0] == name]
