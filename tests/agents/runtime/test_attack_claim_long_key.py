"""Attack: the fenced claim CASTs each value to its column type, and on Postgres an explicit
CAST to varchar(n) truncates silently where an INSERT refuses. A key longer than the column
used to be refused before any call; now the ledger stores a different (truncated) key than the
one the downstream got, and the replay of the same key no longer finds its row."""

from __future__ import annotations

import pytest

from agents.effects import ledger
from agents.models import Effect
from agents.services import run_start

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def calls():
    from pydantic import BaseModel

    from agents.tools import ToolSpec, tool_register

    made: list[str] = []

    class TextArgs(BaseModel):
        text: str

    def write(args, key):
        made.append(key)
        return {"ok": True, "n": len(made)}

    tool_register(
        ToolSpec(name="long_write", description="w", args_model=TextArgs, tier="write", run=write)
    )
    return made


def test_a_key_longer_than_its_column_is_never_stored_other_than_given(note_agent, alice, calls):
    run = run_start(agent="note_agent", input={"topic": "disk"}, user=alice)
    key = f"{run.id}:" + "c" * 250

    def execute():
        return ledger.effect_execute(
            run_id=str(run.id), key=key, tool="long_write", args={"text": "a"}
        )

    try:
        first = execute()
    except Exception:  # refused before anything was called: the old behaviour, acceptable
        assert calls == []
        return
    # It ran: then the ledger must hold exactly this key, and a replay must be deduped.
    assert Effect.objects.filter(key=key).exists(), [
        len(k) for k in Effect.objects.values_list("key", flat=True)
    ]
    assert execute() == first
    assert len(calls) == 1
