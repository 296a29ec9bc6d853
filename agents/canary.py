"""Canaries, agents' side (docs/autonomy.md).

``canary_plant_run`` plants a canary the way a real run pauses: the agent's own graph runs on
the canary's thread, through the normal checkpointer, budget and approval requests, up to its
approval gate. Only its chat model differs: a scripted model (``ScriptedChatModel``) that
writes what the agent's model writes for that input (its text and token usage) but proposes
the template's tool call. So the run has checkpoints, steps and tokens, LangGraph's own
interrupt id, and the agent's own rationale and evidence. The scripted model is set for that
one drive only (a context variable, never process-wide), and while the canary is planted the
ledger refuses every effect of its run (agents/effects/canary.py ``canary_planting``); once
its Canary row exists, the claim's NOT EXISTS refuses them for good, and the lease refuses
every further advance (``RunIsCanary``).
Registered as the approvals app's planter (``AgentsConfig.ready()``).
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Callable, Sequence
from typing import Any

from django.db import transaction
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool

from agents.effects.canary import canary_planting
from agents.hitl import protocol
from agents.runtime import llm
from agents.runtime.budget import budget_spend
from agents.runtime.checkpoint import checkpointer_get, thread_config
from agents.runtime.fenced_saver import EPOCH, GUARD
from agents.runtime.lease import Heartbeat, lease_acquire, lease_owner_new, lease_release
from agents.runtime.registry import agent_get
from approvals import policy
from approvals import services as approval_services
from approvals.models import AgentRun, ApprovalRequest


class CanaryNotPlanted(Exception):
    """The agent's graph did not pause at the template's call (nothing was opened)."""


class ScriptedChatModel(BaseChatModel):
    """The agent's own model (``base``) answers; its tool calls are replaced by ``tool`` with
    ``args`` (the template's call), under the id the model gave its first call."""

    base: Any
    tool: str
    args: dict[str, Any]

    @property
    def _llm_type(self) -> str:
        return getattr(self.base, "_llm_type", "chat")

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[Any, AIMessage]:
        return self.bind(tools=[convert_to_openai_tool(tool) for tool in tools], **kwargs)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        tools = kwargs.get("tools") or []
        names = [tool["function"]["name"] for tool in tools]
        model = self.base.bind_tools(tools) if tools else self.base
        reply = model.invoke(messages)
        if self.tool not in names:  # not the turn that proposes it (no such tool bound)
            return ChatResult(generations=[ChatGeneration(message=reply)])
        calls = reply.tool_calls or []
        call_id = calls[0]["id"] if calls else _call_id(messages)
        message = AIMessage(
            content=reply.content,
            tool_calls=[{"name": self.tool, "args": self.args, "id": call_id, "type": "tool_call"}],
            usage_metadata=reply.usage_metadata,
            response_metadata=reply.response_metadata,
        )
        return ChatResult(generations=[ChatGeneration(message=message)])


def _call_id(messages: list[BaseMessage]) -> str:
    digest = llm.conversation_digest(messages)
    return f"call_{hashlib.sha256(f'{digest}:0'.encode()).hexdigest()[:24]}"


def canary_plant_run(
    *,
    agent: str,
    input: dict[str, Any],
    requested_by: Any,
    tool: str,
    args: dict[str, Any],
    on_paused: Callable[[list[ApprovalRequest]], None],
) -> ApprovalRequest:
    """Create a run of ``agent`` (not enqueued: no worker advances it) and drive its graph to
    its gate with the scripted model; open its approval request and call ``on_paused`` (which
    makes it a canary) in one transaction. When it does not pause there, or ``on_paused``
    raises, the run fails (never advanced again) and the error is raised again."""
    spec = agent_get(agent)
    run = approval_services.run_create(
        agent=agent,
        graph_version=spec.version,
        input=input,
        requested_by=requested_by,
        enqueue=False,
    )
    owner = lease_owner_new()
    taken_at = time.monotonic()
    leased = lease_acquire(run_id=run.pk, owner=owner)
    if leased is None:
        raise CanaryNotPlanted(f"run {run.pk} is leased elsewhere")
    try:
        beat = Heartbeat(run_id=run.pk, owner=owner, epoch=leased.lease_epoch, taken_at=taken_at)
        with (
            approval_services.run_transitions_fenced(lease_owner=owner),
            policy.policy_read_once(),
            beat,
        ):
            return _drive(leased, beat, tool=tool, args=args, on_paused=on_paused)
    except Exception as exc:
        _fail(run, reason=f"canary not planted: {exc}")
        raise
    finally:
        lease_release(run_id=run.pk, owner=owner)


def _drive(run: AgentRun, beat: Heartbeat, *, tool: str, args: dict[str, Any], on_paused) -> Any:
    spec = agent_get(run.agent)
    with (
        canary_planting(run.pk),
        llm.chat_model_wrapped(lambda base: ScriptedChatModel(base=base, tool=tool, args=args)),
    ):
        # Built for this drive (not the process's cached graph): its model is the scripted one.
        graph = spec.factory(checkpointer=checkpointer_get())
        run = approval_services.run_mark_running(run=run, resumed=False)
        config = thread_config(run, version=spec.version)
        config["configurable"].update({"lease_owner": beat.owner, EPOCH: beat.epoch, GUARD: beat})
        for update in graph.stream(
            spec.graph_input(run.input), config, stream_mode="updates", durability="sync"
        ):
            budget_spend(run, update)
        state = graph.get_state(thread_config(run))
    items = [
        item
        for intr in state.interrupts
        for item in protocol.approval_items(
            interrupt_id=intr.id,
            value=intr.value,
            response_schema=getattr(intr, "response_schema", None),
        )
    ]
    if len(items) != 1 or items[0]["tool"] != tool:
        raise CanaryNotPlanted(f"{run.agent} did not pause at {tool} (it opened {len(items)})")
    with transaction.atomic():
        approvals = approval_services.approval_requests_sync(run=run, requests=items, waiting=True)
        on_paused(approvals)
    return approvals[0]


def _fail(run: AgentRun, *, reason: str) -> None:
    """A drive that did not reach the gate: its run fails (never advanced again)."""
    with contextlib.suppress(approval_services.RunStopped):  # ended meanwhile: nothing to do
        approval_services.run_mark_failed(
            run=AgentRun.objects.get(pk=run.pk), error=reason, dead=False
        )
