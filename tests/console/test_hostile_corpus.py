"""The hostile-input corpus: each line one request that once gave a 500 (or left something
half-done), and the answer it must get now: a 4xx in the API's error format naming the field.

Placeholders in URLs and bodies: ``{run}`` (alice's run), ``{approval}`` (its pending approval)
and ``{hash}`` (that approval's payload hash). Requests are made by ``who``: bob approves tier
"write" (demo policy), ``admin`` is the superuser.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from urllib.parse import quote

import pytest

from agents.models import RunStartKey
from approvals.forms import ArgsEditForm
from audit.models import AuditExport
from core.json_limits import MAX_JSON_DEPTH
from tests.support.people import client_for, rest_client_for
from tests.support.probes import API_PROBE, API_PROBE_INPUT, ProbeApprovalFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("queued")]

SURROGATE = '"\\ud800"'  # a lone UTF-16 surrogate, as a JSON escape
TOO_DEEP = 400  # parses (json's own limit is ~1000) but crashed the walkers before
LIST_URLS = ("/api/runs/", "/api/approvals/", "/api/audit/")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def run_body(**input_fields: str) -> str:
    """A run start body whose input fields are raw JSON text."""
    fields = {k: json.dumps(v) for k, v in API_PROBE_INPUT.items()} | input_fields
    inner = ",".join(f"{json.dumps(k)}:{v}" for k, v in fields.items())
    return f'{{"agent":"{API_PROBE}","input":{{{inner}}}}}'


def form_body(**fields: str) -> str:
    """A form-encoded body (its JSON fields as text, which SafeJSONParser never sees)."""
    return "&".join(f"{k}={quote(v, safe='{}')}" for k, v in fields.items())


FORM = "application/x-www-form-urlencoded"
DEEP_INPUT = '{"service": "s", "severity": "sev2", "x": ' + nested(TOO_DEEP) + "}"


def decision_body(**fields: str) -> str:
    """A decision body whose fields are raw JSON text."""
    base = {"decision": '"approve"', "payload_hash": '"{hash}"'} | fields
    return "{" + ",".join(f'"{k}":{v}' for k, v in base.items()) + "}"


@dataclass(frozen=True)
class Case:
    method: str
    url: str
    status: int
    names: str | None = None  # the key ``errors`` must name
    body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    who: str = "admin"
    content_type: str = "application/json"

    def __str__(self) -> str:
        return f"{self.method} {self.url[:60]} {(self.body or '')[:40]}"


DECIDE = "/api/approvals/{approval}/decision/"
FORGED_CURSORS = [
    "garbage",
    b64("\xff\xfe not a query"),
    b64("o=99999999999999999999&p=x"),
    b64("p=abc"),
    b64("p=\x00"),
    b64("p=99999-01-01T00:00:00"),
    b64("p=99999999999999999999999"),
    b64("o=-5&r=x"),
    # a datetime whose offset Postgres refuses (beyond +-15:59) or whose UTC form leaves
    # the years 1..9999 (SQLite's adapter converts to UTC first): 500s before
    b64("p=2020-01-01T00:00:00-16:00"),
    b64("p=9999-12-31T23:59:59-01:00"),
    b64("p=0001-01-01T00:00:00%2B14:00"),
]
CORPUS = [
    # forged, garbage and base64-of-garbage cursors on every paginated list
    *[
        Case("GET", f"{url}?cursor={cursor}", 400, "cursor")
        for url in LIST_URLS
        for cursor in FORGED_CURSORS
    ],
    # page sizes the schema does not allow
    *[
        Case("GET", f"{url}?page_size={size}", 400, "page_size")
        for url in LIST_URLS
        for size in ("0", "-1", "1.5", "9" * 5000, "%C2%B2")
    ],
    # JSON nested deeper than our recursive walkers, inside the parser's own limit
    Case("POST", "/api/runs/", 400, "body", body=run_body(service=nested(TOO_DEEP))),
    Case("POST", "/api/runs/", 400, "body", body=run_body(extra=nested(MAX_JSON_DEPTH))),
    Case("POST", DECIDE, 400, "body", decision_body(args=nested(TOO_DEEP)), who="bob"),
    Case("POST", "/api/runs/", 400, "body", body=nested(5000)),
    # lone surrogates in values, keys and enum fields
    Case("POST", "/api/runs/", 400, "input.service", body=run_body(service=SURROGATE)),
    Case("POST", "/api/runs/", 400, "input.severity", body=run_body(severity=SURROGATE)),
    Case("POST", "/api/runs/", 400, "input", body=run_body(**{"\ud800": "1"})),
    Case("POST", "/api/runs/", 400, "agent", body=f'{{"agent":{SURROGATE},"input":{{}}}}'),
    Case("POST", DECIDE, 400, "decision", decision_body(decision=SURROGATE), who="bob"),
    Case("POST", DECIDE, 400, "args.x", decision_body(args=f'{{"x":{SURROGATE}}}'), who="bob"),
    Case("POST", DECIDE, 400, "args", decision_body(args=f"{{{SURROGATE}:1}}"), who="bob"),
    Case("POST", "/api/auth/token/", 400, "username", body=f'{{"username":{SURROGATE}}}'),
    # ... and in query parameters (they arrive as U+FFFD) and in the Idempotency-Key header
    Case("GET", "/api/runs/?status=%ED%A0%80", 400, "status"),
    Case("GET", "/api/approvals/?status=%ED%A0%80", 400, "status"),
    Case("GET", "/api/metrics/?group=%ED%A0%80", 400, "group"),
    Case(
        "POST",
        "/api/runs/",
        400,
        "Idempotency-Key",
        body=run_body(),
        headers={"Idempotency-Key": "\ud800"},
    ),
    # dates past 9999 and other out-of-range values in the audit filters
    *[
        Case("GET", f"{url}?{query}", 400, name)
        for url in ("/api/audit/", "/api/audit/export.csv", "/api/audit/export.jsonl")
        for query, name in [
            ("date_from=99999-01-01", "date_from"),
            ("date_to=9999-12-31", "date_to"),
            ("date_to=0001-01-01", "date_to"),
            ("date_from=0000-00-00", "date_from"),
            ("approval=99999999999999999999", "approval"),
            ("run=%00", "run"),
            ("actor=%00", "actor"),
        ]
    ],
    # methods: HEAD on an export would start one that nobody reads
    Case("HEAD", "/api/audit/export.csv", 405),
    Case("HEAD", "/api/audit/export.jsonl", 405),
    Case("PUT", "/api/runs/", 405),
    Case("DELETE", DECIDE, 405, who="bob"),
    # bodies: too large, not JSON, wrong content type, empty, huge integers, wrong types
    Case("POST", "/api/runs/", 413, "body", body='{"agent":"' + "a" * (10 * 1024 * 1024) + '"}'),
    Case("POST", "/api/runs/", 400, "body", body="{not json"),
    # the same hostile JSON as text in a form-encoded body: DRF's JSONField parses it itself
    *[
        Case(
            "POST",
            "/api/runs/",
            400,
            "input",
            body=form_body(agent=API_PROBE, input=text),
            headers={"Idempotency-Key": "form-start"},
            content_type=FORM,
        )
        for text in (
            '{"service": "\\ud800", "severity": "sev2"}',
            '{"service": "s", "severity": "sev2", "\\ud800": 1}',
            DEEP_INPUT,
            "[" * 5000 + "]" * 5000,
        )
    ],
    *[
        Case(
            "POST",
            DECIDE,
            400,
            "args",
            body=form_body(decision="edit", payload_hash="{hash}", args=text),
            content_type=FORM,
            who="bob",
        )
        for text in ('{"x": ' + nested(TOO_DEEP) + "}", "[" * 5000 + "]" * 5000)
    ],
    # more fields than DATA_UPLOAD_MAX_NUMBER_FIELDS: Django's HTML 400, not the error format
    *[
        Case(
            "POST",
            url,
            400,
            "body",
            body="&".join(f"f{n}=1" for n in range(1100)),
            content_type="application/x-www-form-urlencoded",
        )
        for url in ("/api/runs/", "/api/auth/token/")
    ],
    Case("POST", "/api/runs/", 415, "Content-Type", body="{}", content_type="text/plain"),
    Case("POST", "/api/runs/", 400, "agent", body=""),
    Case("POST", "/api/runs/", 400, "body", body=run_body(service="1" + "0" * 5000)),
    Case("POST", "/api/runs/", 400, "input.service", body=run_body(service="1" + "0" * 400)),
    Case("POST", "/api/runs/", 400, "agent", body='{"agent":[],"input":{}}'),
    Case("POST", "/api/runs/", 400, "input", body=f'{{"agent":"{API_PROBE}","input":[]}}'),
    Case("POST", DECIDE, 400, "decision", decision_body(decision="7"), who="bob"),
    Case("POST", DECIDE, 400, "payload_hash", decision_body(payload_hash="{}"), who="bob"),
    Case("POST", DECIDE, 400, "args", decision_body(decision='"edit"', args="[1]"), who="bob"),
    Case("POST", DECIDE, 400, "message", decision_body(message="[]"), who="bob"),
    Case("GET", "/api/metrics/?window=" + "9" * 40, 400, "window"),
    Case("GET", "/api/approvals/?mine=maybe", 400, "mine"),
    Case("GET", "/api/approvals/?run=not-a-uuid", 400, "run"),
    Case("GET", "/api/approvals/" + "9" * 40 + "/", 404),
    Case("GET", "/api/runs/" + "f" * 40 + "/", 404),
]


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """The people's demo password hashed cheaply: this module creates a few hundred."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


def _client(case: Case, people: dict):
    client = rest_client_for(people[case.who])
    client.raise_request_exception = False
    return client


@pytest.fixture
def people(bob, admin, demo_policy) -> dict:
    return {"bob": bob, "admin": admin}


@pytest.fixture
def approval(alice, api_probe):
    return ProbeApprovalFactory(run__requested_by=alice)


def _fill(text: str, approval) -> str:
    return (
        text.replace("{run}", str(approval.run_id))
        .replace("{approval}", str(approval.id))
        .replace("{hash}", approval.payload_hash)
    )


@pytest.mark.parametrize("case", CORPUS, ids=str)
def test_a_hostile_request_gets_a_4xx_in_the_error_format_naming_the_field(case, people, approval):
    headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in case.headers.items()}
    body = _fill(case.body, approval) if case.body is not None else None
    response = _client(case, people).generic(
        case.method,
        _fill(case.url, approval),
        body or "",
        content_type=case.content_type,
        **headers,
    )

    assert response.status_code == case.status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")
    if case.method != "HEAD":
        error = response.json()
        assert isinstance(error["detail"], str) and error["detail"]
        assert isinstance(error["errors"], dict)
        if case.names:
            assert case.names in error["errors"], error
    assert not AuditExport.objects.filter(status=AuditExport.Status.STREAMING).exists()
    assert not RunStartKey.objects.exists()


@pytest.mark.parametrize(
    "position",
    [
        "2020-01-01T00:00:00-16:00",
        "9999-12-31T23:59:59-01:00",
        "0001-01-01T00:00:00+14:00",
    ],
)
def test_a_forged_queue_cursor_with_an_odd_offset_shows_the_first_page(admin, approval, position):
    client = client_for(admin)
    client.raise_request_exception = False
    cursor = base64.urlsafe_b64encode(json.dumps([position, "1"]).encode()).decode()

    response = client.get(f"/?cursor={cursor.rstrip('=')}")

    assert response.status_code == 200


@pytest.mark.parametrize(
    "refused_body",
    [run_body(service=nested(TOO_DEEP)), run_body(service=SURROGATE), run_body(severity='"sev9"')],
    ids=["too deep", "surrogate", "invalid input"],
)
def test_a_refused_start_never_claims_its_idempotency_key(alice, api_probe, refused_body):
    client = rest_client_for(alice)
    client.raise_request_exception = False
    key = {"HTTP_IDEMPOTENCY_KEY": "start-1"}

    refused = client.generic("POST", "/api/runs/", refused_body, "application/json", **key)
    retry = client.post(
        "/api/runs/", {"agent": API_PROBE, "input": API_PROBE_INPUT}, format="json", **key
    )

    assert refused.status_code == 400
    assert retry.status_code == 201
    assert str(RunStartKey.objects.get().run_id) == retry.json()["id"]


def test_json_at_the_depth_limit_reaches_every_walker_and_starts_the_run(alice, api_probe):
    client = rest_client_for(alice)
    body = run_body(context=nested(MAX_JSON_DEPTH - 2))  # body > input > context: 2 levels

    response = client.generic(
        "POST", "/api/runs/", body, "application/json", HTTP_IDEMPOTENCY_KEY="deep"
    )

    assert response.status_code == 201, response.content[:300]


@pytest.mark.parametrize(
    "path",
    [
        "/static/../console/settings.py",
        "/static/%2e%2e/console/settings.py",
        "/static/%2e%2e%2fconsole%2fsettings.py",
        "/static/..%2f..%2fmanage.py",
        "/static/css/console.css%00.py",
        "/static/%00",
        "/static/%c0%ae%c0%ae/console/settings.py",
        "/static/" + "a" * 5000,
        "/static/" + "a/" * 2000,
        "/static//etc/passwd",
    ],
)
def test_a_path_trick_on_a_static_url_is_a_404(client, path):
    client.raise_request_exception = False
    response = client.get(path)

    assert response.status_code == 404
    assert b"SECRET_KEY" not in response.content


@pytest.mark.parametrize(
    "url",
    [
        "/api/docs/",
        "/api/schema/",
        "/api/runs/",
        "/api/runs/{run}/",
        "/api/runs/{run}/cancel/",
        "/api/agents/",
        "/api/approvals/",
        "/api/approvals/{approval}/",
        DECIDE,
        "/api/audit/",
        "/api/audit/verify/",
        "/api/audit/export.csv",
        "/api/audit/export.jsonl",
        "/api/metrics/",
        "/api/auth/token/",
    ],
)
@pytest.mark.parametrize("method", ["OPTIONS", "HEAD"])
def test_options_and_head_never_fail_nor_leave_an_export_streaming(admin, approval, url, method):
    client = rest_client_for(admin)
    client.raise_request_exception = False

    response = client.generic(method, _fill(url, approval))

    assert response.status_code in (200, 405)
    assert not AuditExport.objects.filter(status=AuditExport.Status.STREAMING).exists()


# --- pages: the same values give a form error, never a 500 -----------------------------------


@pytest.mark.parametrize(
    "query",
    [
        "date_from=99999-01-01",
        "date_to=9999-12-31",
        "date_from=0000-01-01",
        "approval=99999999999999999999",
        "before=99999999999999999999",
        "before=%C2%B2",
    ],
)
def test_the_audit_page_answers_odd_filters_with_a_form_error_or_no_filter(frank, query):
    client = client_for(frank)
    client.raise_request_exception = False

    response = client.get(f"/audit/?{query}")

    assert response.status_code == 200
    if not query.startswith("before"):
        assert response.context["form"].errors


@pytest.mark.parametrize(
    "text",
    [
        '{"service": "\\ud800", "severity": "sev2"}',
        '{"service": ' + nested(TOO_DEEP) + ', "severity": "sev2"}',
        "[" * 5000,
    ],
    ids=["surrogate", "too deep", "deeper than the parser"],
)
def test_the_start_form_answers_hostile_json_with_a_form_error(alice, page_probe, text):
    client = client_for(alice)
    client.raise_request_exception = False

    response = client.post("/runs/new/", {"agent": page_probe.name, "input": text})

    assert response.status_code == 400
    assert "input" in response.context["form"].errors


@pytest.mark.parametrize(
    "text",
    ['["\\ud800"]', '{"\\ud800": 1}', nested(TOO_DEEP), "[" * 5000],
    ids=["surrogate", "surrogate key", "too deep", "deeper than the parser"],
)
def test_the_decide_form_answers_hostile_json_in_an_edited_arg_with_a_form_error(text):
    form = ArgsEditForm(
        {"args-items": text},
        schema={"type": "object", "properties": {"items": {"type": "array"}}},
        proposed={"items": []},
    )

    assert not form.is_valid()
    assert "items" in form.errors
