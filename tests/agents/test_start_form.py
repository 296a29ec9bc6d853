"""The start-a-run form: one input per property of the agent's input schema, the JSON box as
the fallback (and the alternative), errors next to their inputs, never a 500."""

from __future__ import annotations

import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any, Literal

import pytest
from django.urls import reverse
from pydantic import BaseModel, Field

from agents.forms import RunInputForm
from agents.runtime.registry import AgentSpec
from approvals.models import AgentRun
from approvals.schema_form import JSONValueField, NumberField
from tests.support.people import client_for
from tests.support.probes import probe_registered

pytestmark = pytest.mark.usefixtures("queued")  # every task enqueued is recorded, none runs

NEW = reverse("agents:run-new")
TYPED = "typed_probe"
SCHEMALESS = "schemaless_probe"


class Customer(BaseModel):
    name: str
    tier: int = 0


class TypedInput(BaseModel):
    order_id: str = Field(min_length=1, max_length=20, description="The shop's order number")
    amount: Decimal = Field(gt=0, max_digits=12, decimal_places=2)
    quantity: int = Field(default=1, ge=1, le=1000)
    ratio: float = Field(default=0.5, ge=0, le=1)
    urgent: bool = False
    channel: Literal["email", "phone", "chat"] = "email"
    customer: Customer | None = None
    tags: list[str] = Field(default_factory=list)
    note: str | None = None


EXAMPLE: dict[str, Any] = {
    "order_id": "A-7",
    "amount": "12.50",
    "channel": "chat",
    "customer": {"name": "Ada", "tier": 2},
}


def _never_built(**kwargs: Any) -> Any:
    raise AssertionError("never built")


@pytest.fixture
def typed_probe() -> Iterator[AgentSpec]:
    spec = AgentSpec(
        name=TYPED,
        version="1",
        factory=_never_built,
        description="Takes every kind of input.",
        input_model=TypedInput,
        example_input=dict(EXAMPLE),
    )
    with probe_registered(spec) as registered:
        yield registered


@pytest.fixture
def schemaless_probe() -> Iterator[AgentSpec]:
    spec = AgentSpec(
        name=SCHEMALESS, version="1", factory=_never_built, example_input={"ticket": 42}
    )
    with probe_registered(spec) as registered:
        yield registered


def _form(spec: AgentSpec, data: dict[str, Any] | None = None) -> RunInputForm:
    return RunInputForm(data, schema=spec.input_schema(), example=spec.example_input)


def _post(**values: Any) -> dict[str, Any]:
    """A POST of the generated form: the example's values, as a browser sends them."""
    data = {
        "agent": TYPED,
        "input-order_id": "A-7",
        "input-amount": "12.50",
        "input-quantity": "3",
        "input-ratio": "0.25",
        "input-channel": "chat",
        "input-customer": '{"name": "Ada", "tier": 2}',
        "input-tags": '["vip", "late"]',
        "input-note": "",
    }
    for name, value in values.items():
        if value is None:
            data.pop(f"input-{name}", None)
        else:
            data[f"input-{name}"] = value
    return data


def test_each_property_gets_an_input_of_its_type(typed_probe):
    form = _form(typed_probe)
    fields = form.fields

    assert list(fields) == [
        "order_id",
        "amount",
        "quantity",
        "ratio",
        "urgent",
        "channel",
        "customer",
        "tags",
        "note",
    ]
    assert fields["order_id"].help_text == "The shop's order number"
    assert fields["order_id"].widget.attrs["maxlength"] == 20
    assert isinstance(fields["amount"], NumberField)  # Decimal: its number branch
    assert type(fields["quantity"]).__name__ == "IntegerField"
    assert fields["quantity"].widget.attrs == {"min": 1, "max": 1000}
    assert isinstance(fields["ratio"], NumberField)
    assert type(fields["urgent"]).__name__ == "BooleanField"
    assert [value for value, _ in fields["channel"].choices] == ["", "email", "phone", "chat"]
    assert isinstance(fields["customer"], JSONValueField)  # a nested object
    assert isinstance(fields["tags"], JSONValueField)  # an array
    assert type(fields["note"]).__name__ == "CharField"


def test_only_the_schemas_required_properties_are_required(typed_probe):
    required = {name for name, field in _form(typed_probe).fields.items() if field.required}

    assert required == {"order_id", "amount"}


def test_inputs_start_from_the_example_input_then_the_schemas_defaults(typed_probe):
    form = _form(typed_probe)

    assert form.initial["order_id"] == "A-7"
    assert form.initial["amount"] == "12.50"
    assert form.initial["channel"] == "chat"  # the example wins over the default "email"
    assert form.initial["quantity"] == 1  # no example value: the schema's default
    assert form.initial["ratio"] == 0.5
    html = form.as_div()
    assert 'name="input-order_id" value="A-7"' in html
    assert '<option value="chat" selected>' in html
    assert "&quot;name&quot;: &quot;Ada&quot;" in html


def test_the_page_shows_the_generated_inputs_with_required_marks(alice, typed_probe):
    html = client_for(alice).get(NEW, {"agent": TYPED}).content.decode()

    assert f'<option value="{TYPED}" selected>' in html
    assert 'id="id_input-order_id"' in html and 'id="id_input-customer"' in html
    label = re.search(r'<label for="id_input-order_id">.*?</label>', html).group(0)
    assert "(required)" in label
    label = re.search(r'<label for="id_input-quantity">.*?</label>', html).group(0)
    assert "(required)" not in label
    assert "The shop&#x27;s order number" in html
    assert "Edit the input as JSON instead" in html  # the JSON box is still there


def test_switching_agent_with_htmx_renders_only_the_inputs(alice, typed_probe, page_probe):
    response = client_for(alice).get(
        NEW, {"agent": page_probe.name}, headers={"HX-Request": "true"}
    )

    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div id="run-start"')
    assert 'id="id_input-severity"' in html and 'id="id_input-order_id"' not in html
    assert "HX-Request" in response["Vary"]


def test_the_generated_form_starts_a_run_with_typed_values(
    alice, typed_probe, queued, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = client_for(alice).post(NEW, _post(urgent="on"))

    run = AgentRun.objects.get()
    assert response.status_code == 302, response.content.decode()[:2000]
    assert response["Location"] == reverse("agents:run", args=[run.pk])
    assert run.agent == TYPED and run.requested_by == alice
    assert run.input == {
        "order_id": "A-7",
        "amount": "12.5",
        "quantity": 3,
        "ratio": 0.25,
        "urgent": True,
        "channel": "chat",
        "customer": {"name": "Ada", "tier": 2},
        "tags": ["vip", "late"],
        "note": None,
    }
    assert type(run.input["quantity"]) is int and type(run.input["ratio"]) is float
    assert queued.call_count == 1


def test_blank_optional_inputs_take_the_agents_defaults(alice, typed_probe):
    data = _post(quantity="", ratio="", channel="", customer="", tags="")

    response = client_for(alice).post(NEW, data)

    assert response.status_code == 302
    run = AgentRun.objects.get()
    assert run.input["quantity"] == 1 and run.input["ratio"] == 0.5
    assert run.input["channel"] == "email" and run.input["customer"] is None
    assert run.input["tags"] == [] and run.input["urgent"] is False


def _field_error(html: str, name: str) -> str:
    match = re.search(rf'id="id_input-{name}_error">([^<]*)<', html)
    return match.group(1) if match else ""


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("order_id", "", "This field is required."),
        ("quantity", "2000", "less than or equal to 1000"),  # the agent's schema says so
        ("quantity", "three", "Enter a whole number."),
        ("quantity", "9" * 30, "integers must be within"),  # beyond what JSON holds exactly
        ("quantity", "9" * 5000, "Enter a whole number."),  # past Python's digit limit
        ("amount", "1e400", "Enter a number."),  # infinity
        ("amount", "123.456", "decimal places"),
        ("order_id", "A\x00B", "Null characters are not allowed."),
        ("channel", "fax", "Select a valid choice."),
        ("customer", '{"tier": 2}', "Field required"),  # nested: error on the object's box
        ("customer", '"Ada"', "valid dictionary"),  # wrong type
        ("customer", "{nope", "Not valid JSON"),
        ("tags", "[" * 5000, "Not valid JSON"),
        ("ratio", "NaN", "Enter a number."),
    ],
)
def test_a_bad_value_is_a_400_with_its_error_next_to_its_input(
    alice, typed_probe, name, value, message
):
    client = client_for(alice)
    client.raise_request_exception = False

    response = client.post(NEW, _post(**{name: value}))

    html = response.content.decode()
    assert response.status_code == 400
    assert message in _field_error(html, name), _field_error(html, name) or html[:3000]
    assert not AgentRun.objects.exists()


def test_values_posted_for_inputs_the_schema_lacks_are_ignored(alice, typed_probe):
    response = client_for(alice).post(NEW, {**_post(), "input-admin": "yes"})

    assert response.status_code == 302
    assert "admin" not in AgentRun.objects.get().input


def test_an_agent_without_an_input_schema_gets_the_json_box(alice, schemaless_probe, queued):
    client = client_for(alice)

    html = client.get(NEW, {"agent": SCHEMALESS}).content.decode()
    assert 'id="id_input"' in html and "id_input-" not in html
    assert "&quot;ticket&quot;: 42" in html
    assert "Edit the input as JSON instead" not in html

    response = client.post(NEW, {"agent": SCHEMALESS, "input": '{"ticket": 43, "x": [1]}'})
    assert response.status_code == 302
    assert AgentRun.objects.get().input == {"ticket": 43, "x": [1]}


def test_the_json_box_still_starts_an_agent_that_has_a_schema(alice, typed_probe):
    client = client_for(alice)
    body = '{"order_id": "B-1", "amount": 5, "quantity": 2}'

    response = client.post(NEW, {"agent": TYPED, "input": body})

    assert response.status_code == 302
    assert AgentRun.objects.get().input["order_id"] == "B-1"


def test_an_error_in_the_json_box_keeps_it_open_beside_the_generated_inputs(alice, typed_probe):
    response = client_for(alice).post(NEW, {"agent": TYPED, "input": '{"order_id": ""}'})

    html = response.content.decode()
    assert response.status_code == 400
    assert '<details class="decision-group json-alt" id="json-alt" open>' in html
    assert "order_id:" in _json_error(html)
    assert 'id="id_input-order_id"' in html


def _json_error(html: str) -> str:
    match = re.search(r'id="id_input_error">([^<]*)<', html)
    return match.group(1) if match else ""


def test_a_post_for_an_unknown_agent_is_a_400(alice, typed_probe):
    response = client_for(alice).post(NEW, {**_post(), "agent": "nobody"})

    assert response.status_code == 400
    assert not AgentRun.objects.exists()
