"""The agent: a scripted model, one refund tool, the console's gate, its own checkpointer."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from approval_console_client import ConsoleClient
from approval_console_client.middleware import RemoteGateMiddleware
from langchain.agents import create_agent
from langgraph.checkpoint.sqlite import SqliteSaver

from .model import ScriptedChatModel
from .payments import Payments, refund_tool


def agent_build(
    *,
    client: ConsoleClient,
    payments: Payments,
    checkpoint_path: Path | str,
    callback_url: str | None = None,
) -> Any:
    """The compiled agent graph; its checkpoints live in ``checkpoint_path`` (SQLite)."""
    saver = SqliteSaver(sqlite3.connect(str(checkpoint_path), check_same_thread=False))
    return create_agent(
        ScriptedChatModel(),
        tools=[refund_tool(payments)],
        middleware=[
            RemoteGateMiddleware(
                {"refund_issue": {"allowed_decisions": ["approve", "edit", "reject"]}},
                client,
                callback_url=callback_url,
                context=lambda calls, state: {
                    "rationale": "The customer asked for a refund.",
                    "blast_radius": "One refund to one order; money leaves the company.",
                },
            )
        ],
        checkpointer=saver,
    )
