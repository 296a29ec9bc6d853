"""The incident copilot: investigate -> propose -> a person approves -> execute -> notify.

Reads happen in ``investigate`` and the model call in ``propose_action``, so both are
checkpointed before the gate; ``human_approval`` does nothing but ask (invariant 2), and the
only side effects run in ``execute`` and ``notify``, through the effects ledger.
"""

from __future__ import annotations

from typing import Any, Literal

from django.utils import timezone
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph

from agents.effects.ledger import effect_execute
from agents.effects.undone import ActionUndone
from agents.graphs.incident_copilot import prompts
from agents.graphs.incident_copilot.offline import incident_responder
from agents.graphs.incident_copilot.state import IncidentInput, IncidentState
from agents.graphs.incident_copilot.tools import ACTION_TOOLS, NOTIFY_TOOL, tool_definitions
from agents.hitl.gate import approval_gate
from agents.runtime.llm import chat_model_get
from agents.runtime.registry import AgentSpec, agent_register
from agents.tools import tool_get

NAME = "incident_copilot"
VERSION = "1"
# What this graph does after a rejection (route_after_approval and notify below), shown to the
# reviewer beside the reject button.
ON_DENY_ACTION = (
    "The action is not taken; #incidents is told you rejected it (with your reason) and the "
    "run ends."
)
ON_DENY_NOTIFY = "The run ends without posting."


def _thread_id() -> str:
    return get_config()["configurable"]["thread_id"]


def investigate(state: IncidentState) -> dict[str, Any]:
    service = state["service"]
    metrics = tool_get("fetch_metrics").run({"service": service, "window_minutes": 60}, None)
    logs = tool_get("search_logs").run(
        {"service": service, "query": state["signal"], "limit": 5}, None
    )
    deploys = tool_get("list_recent_deploys").run({"service": service, "hours": 24}, None)
    evidence = [
        f"{service} error rate {metrics['error_rate_pct']}%, p95 {metrics['p95_latency_ms']} ms "
        f"over the last {metrics['window_minutes']} min",
        f"{len(logs['matches'])} log lines match {state['signal']!r}",
    ]
    evidence += [
        f"deploy {d['version']} (from {d['previous_version'] or 'nothing'}) at {d['deployed_at']}"
        + (" [rollback]" if d["is_rollback"] else "")
        for d in deploys["deploys"]
    ] or [f"no deploy of {service} in the last 24 h"]
    return {
        "findings": {"metrics": metrics, "logs": logs, "deploys": deploys["deploys"]},
        "evidence": evidence,
    }


def propose_action(state: IncidentState) -> dict[str, Any]:
    model = chat_model_get(offline_responder=incident_responder).bind_tools(
        tool_definitions(ACTION_TOOLS)
    )
    incident = {key: state[key] for key in ("service", "signal", "severity")}
    reply = model.invoke(
        [
            SystemMessage(prompts.SYSTEM_PROMPT),
            HumanMessage(
                prompts.proposal_prompt(
                    incident=incident, findings=state["findings"], evidence=state["evidence"]
                )
            ),
        ]
    )
    calls = [call for call in reply.tool_calls if call["name"] in ACTION_TOOLS]
    if not calls:
        raise ValueError(f"the model proposed no action (it said: {reply.content!r})")
    call = calls[0]
    usage = reply.usage_metadata or {}
    return {
        "proposal": {
            "tool": call["name"],
            "args": tool_get(call["name"]).validate(call["args"]),
            "rationale": reply.text,
            "tool_call_id": call["id"],
            # Fixed here, before the gate, so the payload is the same on every re-run.
            "requested_at": timezone.now().isoformat(),
        },
        "tokens_used": state.get("tokens_used", 0) + int(usage.get("total_tokens", 0)),
    }


def human_approval(state: IncidentState) -> dict[str, Any]:
    proposal = state["proposal"]
    decision = approval_gate(
        tool=proposal["tool"],
        args=proposal["args"],
        rationale=proposal["rationale"],
        evidence=state["evidence"],
        requested_at=proposal["requested_at"],
        on_deny=ON_DENY_ACTION,
        # execute's ledger key: the next node runs the effect under it, nothing in between.
        key=f"{_thread_id()}:{proposal['tool_call_id']}",
    )
    return {"decision": decision}


def route_after_approval(state: IncidentState) -> Literal["execute", "notify"]:
    decision = state["decision"]["decision"]
    if decision in ("approve", "edit"):
        return "execute"
    if decision in ("reject", "respond"):
        return "notify"
    raise ValueError(f"unexpected decision {decision!r}")


def execute(state: IncidentState) -> dict[str, Any]:
    proposal, decision = state["proposal"], state["decision"]
    thread_id = _thread_id()
    try:
        result = effect_execute(
            run_id=thread_id,
            key=f"{thread_id}:{proposal['tool_call_id']}",
            tool=proposal["tool"],
            args=decision["args"],
            approval_id=decision["approval_id"],
        )
    except ActionUndone:  # it ran without waiting, and a reviewer undid it before it ran
        return {"outcome": {"status": "undone", "tool": proposal["tool"], "by": decision["by"]}}
    return {
        "outcome": {
            "status": "executed",
            "tool": proposal["tool"],
            "args": decision["args"],
            "result": result,
            "by": decision["by"],
            "approval_id": decision["approval_id"],
        }
    }


def notify(state: IncidentState) -> dict[str, Any]:
    proposal, decision = state["proposal"], state["decision"]
    outcome = state.get("outcome") or {
        "status": "rejected" if decision["decision"] == "reject" else "responded",
        "tool": proposal["tool"],
        "by": decision["by"],
        "message": decision["message"],
    }
    incident = {key: state[key] for key in ("service", "signal", "severity")}
    message = prompts.notify_message(incident=incident, outcome=outcome)
    args = {"channel": "incidents", "message": message[:2000]}
    # notify_channel is tier read, so the gate passes it without a person unless a policy
    # raises its tier; then this node pauses here, before the post.
    gate = approval_gate(
        tool=NOTIFY_TOOL,
        args=args,
        rationale="Tell the incident channel what was decided.",
        evidence=[],
        requested_at=proposal["requested_at"],
        on_deny=ON_DENY_NOTIFY,
        key=f"{_thread_id()}:{proposal['tool_call_id']}:notify",
    )
    notification: dict[str, Any] = {"status": gate["decision"]}
    if gate["decision"] in ("approve", "edit"):
        thread_id = _thread_id()
        notification = effect_execute(
            run_id=thread_id,
            key=f"{thread_id}:{proposal['tool_call_id']}:notify",
            tool=NOTIFY_TOOL,
            args=gate["args"],
            approval_id=gate["approval_id"],
        )
    return {"outcome": outcome, "notification": notification, "summary": message}


def build(*, checkpointer: Any = None) -> Any:
    builder = StateGraph(IncidentState)
    builder.add_node("investigate", investigate)
    builder.add_node("propose_action", propose_action)
    builder.add_node("human_approval", human_approval)
    builder.add_node("execute", execute)
    builder.add_node("notify", notify)
    builder.add_edge(START, "investigate")
    builder.add_edge("investigate", "propose_action")
    builder.add_edge("propose_action", "human_approval")
    builder.add_conditional_edges("human_approval", route_after_approval, ["execute", "notify"])
    builder.add_edge("execute", "notify")
    builder.add_edge("notify", END)
    return builder.compile(checkpointer=checkpointer, name=NAME)


agent_register(
    AgentSpec(
        name=NAME,
        version=VERSION,
        factory=build,
        description="Investigates an incident, proposes a rollback or a ticket, and notifies.",
        input_model=IncidentInput,
        example_input={
            "service": "checkout",
            "signal": "5xx rate above 5% since the last deploy",
            "severity": "sev1",
        },
    )
)
