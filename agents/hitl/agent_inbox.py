"""Agent Inbox payloads: the older ``HumanInterrupt`` schema (``langgraph.prebuilt.interrupt``,
now ``langchain.agents.interrupt``) and its ``HumanResponse`` answer.

A graph written for Agent Inbox calls ``interrupt([request])[0]`` (or ``interrupt(request)``)
with ``{"action_request": {"action", "args"}, "config": {"allow_accept", "allow_edit",
"allow_respond", "allow_ignore"}, "description"}``. The console makes one approval of it: the
config says which decisions the graph can take (accept -> approve, edit -> edit, respond ->
respond, ignore -> reject), the console's policy says the tier, the description is the
rationale. The answer has the shape the request came in (a list of one for a list), as Agent
Inbox itself sends it:

- approve -> ``{"type": "accept", "args": <the action request as approved>}`` when the config
  allows edits (Agent Inbox sends the unedited action request then), else ``"args": None``;
- edit -> ``{"type": "edit", "args": {"action": <name>, "args": <edited args>}}``;
- respond -> ``{"type": "response", "args": <the reviewer's text>}``;
- reject -> ``{"type": "ignore", "args": None}``: ignore is the only "no" the schema has, so a
  reviewer's reason does not reach the graph (it stays in the console's audit).
"""

from __future__ import annotations

from typing import Any

from agents.hitl.items import action_item

AGENT_INBOX = "agent_inbox"
# What each config flag lets the reviewer do, in the console's words.
CONFIG_DECISIONS = {
    "allow_accept": "approve",
    "allow_edit": "edit",
    "allow_respond": "respond",
    "allow_ignore": "reject",
}
# What an Agent Inbox graph does with "ignore": only the graph knows.
IGNORE_THEN = (
    "The agent's graph gets \"ignore\" (the Agent Inbox schema's only answer for no; your "
    "reason stays in the console) and takes its own next step."
)


def human_interrupt(value: Any) -> dict[str, Any] | None:
    """The ``HumanInterrupt`` in ``value`` (alone or a list of one), else None."""
    if isinstance(value, list):
        if len(value) != 1:
            return None
        value = value[0]
    if not isinstance(value, dict):
        return None
    action = value.get("action_request")
    config = value.get("config")
    if not (isinstance(action, dict) and isinstance(action.get("action"), str)):
        return None
    if not isinstance(config, dict) or not any(key in config for key in CONFIG_DECISIONS):
        return None
    args = action.get("args")
    if args is not None and not isinstance(args, dict):
        return None
    return value


def is_human_interrupt(value: Any) -> bool:
    return human_interrupt(value) is not None


def allowed_decisions(config: dict[str, Any]) -> list[str]:
    """The console decisions the config allows; ignore when it allows nothing (Agent Inbox
    itself always offers ignore)."""
    allowed = [decision for key, decision in CONFIG_DECISIONS.items() if config.get(key) is True]
    return allowed or ["reject"]


def approval_items(*, interrupt_id: str, value: Any) -> list[dict[str, Any]]:
    """The one approval item of an Agent Inbox interrupt."""
    request = human_interrupt(value)
    if request is None:
        raise ValueError("not an Agent Inbox HumanInterrupt")
    action = request["action_request"]
    return [
        action_item(
            interrupt_id=interrupt_id,
            index=0,
            count=1,
            protocol=AGENT_INBOX,
            mode="list" if isinstance(value, list) else "single",
            name=action["action"],
            args=action.get("args") or {},
            description=str(request.get("description") or ""),
            review={"allowed_decisions": allowed_decisions(request["config"])},
            then=IGNORE_THEN,
        )
    ]


def human_response(decision: dict[str, Any], *, request: dict[str, Any]) -> dict[str, Any]:
    """The console's decision dict as Agent Inbox's ``HumanResponse``."""
    kind = decision.get("decision")
    action = request["action_request"]
    name = action["action"]
    if kind == "approve":
        approved = {"action": name, "args": action.get("args") or {}}
        return {"type": "accept", "args": approved if request["config"].get("allow_edit") else None}
    if kind == "edit":
        args = decision.get("args") if isinstance(decision.get("args"), dict) else {}
        return {"type": "edit", "args": {"action": name, "args": args}}
    if kind == "respond":
        return {"type": "response", "args": str(decision.get("message") or "")}
    if kind == "reject":
        return {"type": "ignore", "args": None}
    raise ValueError(f"not a console decision: {decision!r}")


def resume_value(*, value: Any, decisions: list[dict[str, Any]]) -> Any:
    """The resume value: one ``HumanResponse``, in a list when the request came in one."""
    request = human_interrupt(value)
    if request is None:
        raise ValueError("not an Agent Inbox HumanInterrupt")
    response = human_response(decisions[0], request=request)
    return [response] if isinstance(value, list) else response
