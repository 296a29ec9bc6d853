"""The args schema an edit must match, read off a per-call ``response_schema``: keywords beside a
``$ref`` never weaken the referenced schema (found by the hostile review of the restructuring)."""

from __future__ import annotations

from agents.hitl.protocol import schema_edit_args
from approvals.schema import args_errors

ARGS = {
    "type": "object",
    "properties": {
        "order_id": {"type": "string"},
        "amount": {"type": "number", "maximum": 500},
    },
    "required": ["order_id", "amount"],
}


def response_schema(args_node: dict) -> dict:
    return {
        "$defs": {"Args": ARGS},
        "oneOf": [
            {"type": "object", "properties": {"type": {"const": "approve"}}},
            {
                "type": "object",
                "properties": {
                    "type": {"const": "edit"},
                    "edited_action": {
                        "type": "object",
                        "properties": {"name": {"type": "string"}, "args": args_node},
                    },
                },
            },
        ],
    }


def test_a_description_beside_the_ref_leaves_the_args_schema_as_referenced():
    assert schema_edit_args(response_schema({"$ref": "#/$defs/Args", "description": "x"})) == ARGS


def test_keywords_beside_the_ref_cannot_drop_the_referenced_constraints():
    schema = schema_edit_args(
        response_schema(
            {
                "$ref": "#/$defs/Args",
                "required": ["order_id"],
                "properties": {"order_id": {"type": "string"}},
            }
        )
    )
    assert args_errors(schema=schema, args={"order_id": "A-1"})
    assert args_errors(schema=schema, args={"order_id": "A-1", "amount": 10_000})
