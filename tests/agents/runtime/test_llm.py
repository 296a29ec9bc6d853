"""The model factory and the offline model."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from agents.graphs.incident_copilot.offline import incident_responder
from agents.graphs.incident_copilot.tools import ACTION_TOOLS, tool_definitions
from agents.runtime import llm
from agents.runtime.llm import OfflineChatModel, chat_model_get


def _echo_tool(messages, tools):
    return "calling", [{"name": "fetch_metrics", "args": {"service": messages[-1].content}}]


def _model():
    return OfflineChatModel(responder=_echo_tool).bind_tools(tool_definitions(("fetch_metrics",)))


def test_offline_model_emits_real_tool_calls_with_usage():
    reply = _model().invoke([HumanMessage("checkout")])
    assert isinstance(reply, AIMessage)
    (call,) = reply.tool_calls
    assert call["name"] == "fetch_metrics"
    assert call["args"] == {"service": "checkout"}
    assert call["id"].startswith("call_")
    usage = reply.usage_metadata
    assert usage["input_tokens"] > 0 and usage["output_tokens"] > 0
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def test_tool_call_ids_are_stable_for_the_same_conversation_and_differ_otherwise():
    first = _model().invoke([HumanMessage("checkout")]).tool_calls[0]["id"]
    again = _model().invoke([HumanMessage("checkout")]).tool_calls[0]["id"]
    other = _model().invoke([HumanMessage("payments")]).tool_calls[0]["id"]
    assert first == again
    assert first != other


def test_offline_model_refuses_to_call_a_tool_that_is_not_bound():
    model = OfflineChatModel(responder=_echo_tool).bind_tools(tool_definitions(("search_logs",)))
    with pytest.raises(ValueError, match="not bound"):
        model.invoke([HumanMessage("checkout")])


def test_default_responder_calls_no_tool_and_still_reports_usage():
    reply = OfflineChatModel().invoke(
        [
            HumanMessage("hi"),
            AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "c1"}]),
            ToolMessage("42", tool_call_id="c1", name="t"),
        ]
    )
    assert reply.tool_calls == []
    assert "42" in reply.content
    assert reply.usage_metadata["total_tokens"] > 0


def test_without_agent_model_the_factory_returns_the_offline_model(settings):
    settings.AGENT_MODEL = ""
    model = chat_model_get(offline_responder=_echo_tool)
    assert isinstance(model, OfflineChatModel)
    assert model.responder is _echo_tool


def test_with_agent_model_the_factory_uses_init_chat_model(settings, monkeypatch):
    settings.AGENT_MODEL = "anthropic:claude-sonnet-4-5"
    seen = []
    monkeypatch.setattr(llm, "init_chat_model", lambda name: seen.append(name) or "provider model")
    assert chat_model_get() == "provider model"
    assert seen == ["anthropic:claude-sonnet-4-5"]


def _incident_prompt(severity: str, deploys: list[dict]) -> list:
    from agents.graphs.incident_copilot.prompts import SYSTEM_PROMPT, proposal_prompt

    incident = {"service": "checkout", "signal": "5xx", "severity": severity}
    prompt = proposal_prompt(incident=incident, findings={"deploys": deploys}, evidence=["e"])
    return [SystemMessage(SYSTEM_PROMPT), HumanMessage(prompt)]


DEPLOY = {"version": "v42", "previous_version": "v41", "is_rollback": False, "deployed_at": "now"}


@pytest.mark.parametrize(
    ("severity", "deploys", "tool"),
    [
        ("sev1", [DEPLOY], "rollback_deploy"),
        ("sev2", [DEPLOY], "rollback_deploy"),
        ("sev3", [DEPLOY], "create_incident_ticket"),
        ("sev1", [], "create_incident_ticket"),
        ("sev1", [{**DEPLOY, "is_rollback": True}], "create_incident_ticket"),
    ],
)
def test_incident_responder_rolls_back_only_a_recent_deploy_at_sev1_or_sev2(
    severity, deploys, tool
):
    model = OfflineChatModel(responder=incident_responder).bind_tools(
        tool_definitions(ACTION_TOOLS)
    )
    (call,) = model.invoke(_incident_prompt(severity, deploys)).tool_calls
    assert call["name"] == tool
