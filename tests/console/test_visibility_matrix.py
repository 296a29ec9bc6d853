"""Every URL of the project against every demo role (docs/security.md, "Who may see and do what").

The URLs come from the resolver, so a new endpoint is requested here without editing this file:
its expected answers come from ``EXPECTED`` when its name is there, else from the strict
default (anonymous: to the login page, 401 or 403; everyone else: 403, 404 or 405). Path
parameters name objects of other people: alice's run with an approval in tier "critical"
(which bob and carol may decide), then alice's run whose tier nobody may decide, with its
approval, effect and audit event. Every body is searched for the planted markers and ids of the
objects the role may not see (alice's runs of each tier, dave's own run, a traceback's frame).

GET, HEAD and OPTIONS are sent (OPTIONS describes an endpoint: it must leak nothing either).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from approvals.models import AgentRun, RiskTier
from approvals.services import policy_seed_demo
from audit.services import event_record
from tests.support.autonomy import AutonomousActionFactory
from tests.support.factories import ApprovalFactory, EffectFactory, RunFactory

pytestmark = pytest.mark.django_db

ROLES = ("anonymous", "alice", "bob", "carol", "dave", "erin", "frank", "admin")
SIGNED_IN = frozenset(ROLES) - {"anonymous"}
COMPLIANCE = frozenset({"frank", "admin"})
MANAGERS = frozenset({"erin", "admin"})
# Who may see each planted object (the rule of approvals/permissions.py).
SEES = {
    "critical": frozenset({"alice", "bob", "carol", "frank", "admin"}),  # both may vote
    "write": frozenset({"alice", "bob", "carol", "frank", "admin"}),
    "nobody": frozenset({"alice", "frank", "admin"}),  # a tier whose group has no members
    "dave": frozenset({"dave", "frank", "admin"}),  # dave's own run, with no approval
    "frame": frozenset({"admin"}),  # a traceback's file paths: admins only
}
FRAME = "/srv/agents/frame_marker_7f3c.py"

LOGIN = "login"  # a 302 to the console's login page
ADMIN_LOGIN = "admin-login"  # a 302 to the admin's login page
OBJECT = "object"  # 200 when the role may see the object the path names, else 404
Answer = int | str
METHODS = ("get", "head", "options")


def _by_role(default: set[Answer], **roles: set[Answer]) -> dict[str, set[Answer]]:
    return {role: roles.get(role, default) for role in ROLES}


def _for(
    who: frozenset[str], yes: set[Answer], no: set[Answer], anonymous: set[Answer]
) -> dict[str, set[Answer]]:
    return {
        role: anonymous if role == "anonymous" else (yes if role in who else no) for role in ROLES
    }


ANY_SIGNED_IN = _for(SIGNED_IN, {200}, set(), {LOGIN})
API_SIGNED_IN = _for(SIGNED_IN, {200}, set(), {401, 403})
POST_ONLY = _by_role({405})
PUBLIC = _by_role({200})

# (url name) -> role -> the answers allowed to a GET. "admin:*" is every admin URL without an
# entry of its own (the admin answers staff only; its one staff member here is a superuser).
EXPECTED: dict[str, dict[str, set[Answer]]] = {
    "login": PUBLIC,
    "logout": POST_ONLY,
    "metrics": _for(MANAGERS, {200}, {403}, {LOGIN}),
    # Checkpoint storage and retention (console/ops_views.py): staff only; here, the superuser.
    "ops": _for(frozenset({"admin"}), {200}, {403}, {LOGIN}),
    "metrics-export": _for(MANAGERS, {200}, {403}, {LOGIN}),
    # Graduated autonomy's advice (console/autonomy_views.py): managers see it; applying is
    # a POST whose service asks for approvals.change_autonomyrule.
    "autonomy": _for(MANAGERS, {200}, {403}, {LOGIN}),
    "autonomy-apply": POST_ONLY,
    "approvals:queue": ANY_SIGNED_IN,
    "approvals:detail": _by_role({OBJECT}, anonymous={LOGIN}),
    "approvals:decide": POST_ONLY,
    "approvals:edit-preview": POST_ONLY,
    # A signed link (tests/approvals/test_decision_links.py): signed in, a token that is not
    # one is 404; the decision is a POST. Slack's interactions: POST only, signed by Slack.
    "approvals:decision-link": _by_role({404}, anonymous={LOGIN}),
    "approvals:decision-link-decide": POST_ONLY,
    "approvals:slack-interactions": POST_ONLY,
    "approvals:claim": POST_ONLY,
    "approvals:claim-release": POST_ONLY,
    "approvals:assign": POST_ONLY,
    "approvals:unassign": POST_ONLY,
    # Review after the fact (docs/autonomy.md): an action is seen as its run is, or by whoever
    # may review its tier.
    "approvals:after-queue": ANY_SIGNED_IN,
    "approvals:after-detail": _by_role({OBJECT}, anonymous={LOGIN}),
    "approvals:after-review": POST_ONLY,
    # Batches (approvals/batch_selectors.py): each reader sees only what they may decide.
    "approvals:batches": ANY_SIGNED_IN,
    "approvals:batch": ANY_SIGNED_IN,
    "approvals:batch-decide": POST_ONLY,
    # The canary report (docs/autonomy.md): compliance and admins, like the audit log.
    "approvals:canaries": _for(COMPLIANCE, {200}, {403}, {LOGIN}),
    "agents:runs": ANY_SIGNED_IN,
    "agents:run-new": ANY_SIGNED_IN,
    "agents:run": _by_role({OBJECT}, anonymous={LOGIN}),
    "agents:run-cancel": POST_ONLY,
    "agents:run-fork": POST_ONLY,
    "agents:effect-settle": POST_ONLY,
    # Time travel needs its own permission (checked first: 403); the checkpoint is not the run's.
    "agents:run-step": _for(frozenset({"admin"}), {404}, {403}, {LOGIN}),
    "audit:log": _for(COMPLIANCE, {200}, {403}, {LOGIN}),
    "audit:event": _for(COMPLIANCE, {200}, {403}, {LOGIN}),
    "audit:exports": _for(COMPLIANCE, {200}, {403}, {LOGIN}),
    "audit:verify": _for(COMPLIANCE, {200}, {403}, {LOGIN}),
    "api-token": POST_ONLY,
    "api-metrics": _for(MANAGERS, {200}, {403}, {401, 403}),
    "api-autonomy-advice": _for(MANAGERS, {200}, {403}, {401, 403}),
    "api-schema": PUBLIC,
    "api-docs": PUBLIC,
    # Operations: no session; /metrics by token or network (the test client is on loopback,
    # which the default allows: tests/console/test_prometheus.py), /readyz 503 with no worker.
    "prometheus-metrics": PUBLIC,
    "healthz": PUBLIC,
    "readyz": _by_role({200, 503}),
    "agents_api:agents": API_SIGNED_IN,
    "agents_api:runs": API_SIGNED_IN,
    "agents_api:run-detail": _by_role({OBJECT}, anonymous={401, 403}),
    "agents_api:run-cancel": _by_role({405}, anonymous={401, 403}),
    "approvals_api:list": API_SIGNED_IN,
    "approvals_api:detail": _by_role({OBJECT}, anonymous={401, 403}),
    "approvals_api:decide": _by_role({405}, anonymous={401, 403}),
    "approvals_api:claim": _by_role({405}, anonymous={401, 403}),
    "approvals_api:assign": _by_role({405}, anonymous={401, 403}),
    "approvals_api:autonomous-actions": API_SIGNED_IN,
    "approvals_api:autonomous-action": _by_role({OBJECT}, anonymous={401, 403}),
    "approvals_api:autonomous-action-review": _by_role({405}, anonymous={401, 403}),
    "approvals_api:batches": API_SIGNED_IN,
    "approvals_api:batch-decide": _by_role({405}, anonymous={401, 403}),
    "approvals_api:canaries-report": _for(COMPLIANCE, {200}, {403}, {401, 403}),
    # External agents' API (agents/remote/): an agent key only; a person is refused (403).
    "remote_api:requests": _by_role({403}, anonymous={401}),
    "remote_api:request": _by_role({403}, anonymous={401}),
    "remote_api:outcome": _by_role({403}, anonymous={401}),
    "remote_api:thread_finish": _by_role({403}, anonymous={401}),
    "audit_api:list": _for(COMPLIANCE, {200}, {403}, {401, 403}),
    "audit_api:verify": _for(COMPLIANCE, {200}, {403}, {401, 403}),
    "audit_api:export_csv": _for(COMPLIANCE, {200}, {403}, {401, 403}),
    "audit_api:export_jsonl": _for(COMPLIANCE, {200}, {403}, {401, 403}),
    # The admin's login form is the console's (one lock-out): its URL redirects there.
    "admin/login/": _by_role({LOGIN}),
    "admin:login": _by_role({LOGIN}),
    "account-tokens": ANY_SIGNED_IN,  # one's own tokens only (tests/console/test_tokens_page.py)
    "api-tokens": API_SIGNED_IN,
    "admin:logout": _by_role({302}, admin={405}),  # non-staff: to the admin's index, then login
    # Never for non-staff. The superuser: a page, a redirect, a missing object, or 403 where
    # the admin grants nobody the action (adding or deleting audit rows).
    "admin:*": _by_role({ADMIN_LOGIN}, admin={200, 302, 403, 404}),
}
# Extra query strings for pages whose default view hides part of what the reader may see.
VARIANTS = {
    "approvals:queue": ("scope=all",),
    "approvals_api:list": ("status=pending",),
    "approvals:after-queue": ("view=all",),
}
STRICT_DEFAULT = _by_role({403, 404, 405}, anonymous={LOGIN, 401, 403})


@dataclass(frozen=True)
class Endpoint:
    key: str  # "namespace:name", or "namespace:route" for an unnamed pattern
    route: str
    callback: Callable[..., Any]


def _text(pattern: Any) -> str:
    return str(pattern).removeprefix("^").removesuffix("$").removesuffix(r"\Z")


def endpoints(
    resolver: URLResolver | None = None, prefix: str = "", namespace: str = ""
) -> Iterator[Endpoint]:
    """Every URL pattern of the project, through every include."""
    for entry in (resolver or get_resolver()).url_patterns:
        route = prefix + _text(entry.pattern)
        if isinstance(entry, URLResolver):
            inner = ":".join(n for n in (namespace, entry.namespace) if n)
            yield from endpoints(entry, route, inner)
        elif isinstance(entry, URLPattern):
            key = entry.name or route
            yield Endpoint(f"{namespace}:{key}" if namespace else key, route, entry.callback)


def expected(key: str, *, role: str, target: str) -> set[Answer]:
    """The answers allowed to ``role`` for a GET of ``key`` naming the ``target`` object."""
    namespace = key.partition(":")[0] if ":" in key else ""
    table = EXPECTED.get(key) or EXPECTED.get(f"{namespace}:*") or STRICT_DEFAULT
    sees = 200 if role in SEES[target] else 404
    return {sees if answer == OBJECT else answer for answer in table[role]}


@dataclass
class World:
    """The planted objects: ``markers[name]`` are strings only SEES[name] may read."""

    values: dict[str, dict[str, str]]  # target -> path parameter -> value
    markers: dict[str, list[str]]


def _planted_run(requested_by: Any, tier: str | None, name: str) -> tuple[AgentRun, list[str]]:
    secret = f"SECRET-{name.upper()}-4b1d"
    run = RunFactory(
        requested_by=requested_by,
        status=AgentRun.Status.DEAD,
        input={"order_id": f"{secret}-input"},
        output={"note": f"{secret}-output"},
        error=f'ValueError: {secret}-error\n\nTraceback (most recent call last):\n  File "{FRAME}"',
    )
    if tier is not None:
        ApprovalFactory(run=run, tier=tier, args={"order_id": f"{secret}-args", "amount": 1})
    return run, [secret, str(run.pk)]


@pytest.fixture
def world(alice, bob, carol, dave, erin, frank, admin) -> World:
    policy_seed_demo()
    groups = {g.name: g for g in Group.objects.all()}
    bob.groups.add(groups["approvers-write"])
    carol.groups.add(groups["approvers-write"], groups["approvers-critical"])
    vault = RiskTier.objects.create(name="vault", level=99)
    vault.approver_groups.add(Group.objects.create(name="vault-keepers"))
    markers: dict[str, list[str]] = {"frame": [FRAME]}
    runs: dict[str, AgentRun] = {}
    for name, owner, tier in (
        ("critical", alice, "critical"),
        ("write", alice, "write"),
        ("nobody", alice, "vault"),
        ("dave", dave, None),
    ):
        runs[name], markers[name] = _planted_run(owner, tier, name)
    content_type = str(ContentType.objects.get_for_model(AgentRun).pk)
    values = {name: _parameters(runs[name], content_type) for name in ("critical", "nobody")}
    return World(values=values, markers=markers)


def _parameters(run: AgentRun, content_type: str) -> dict[str, str]:
    """Path parameters naming ``run``, its approval, its effect, an action of its that ran
    without waiting (in the approval's tier), and its audit event."""
    approval = run.approvals.get()
    effect = EffectFactory(run=run, approval=approval, result={"r": run.input["order_id"]})
    action = AutonomousActionFactory(run=run, tier=approval.tier, args=dict(approval.args))
    event = event_record(
        action="approval.requested",
        actor=f"agent:{run.pk}",
        run_id=run.pk,
        approval_id=approval.pk,
        tool=approval.tool,
        data={"payload": approval.payload, "input": run.input},
    )
    return {
        "run_id": str(run.pk),
        "approval_id": str(approval.pk),
        "effect_id": str(effect.pk),
        "action_id": str(action.pk),
        "seq": str(event.seq),
        "checkpoint_id": "0",
        "content_type_id": content_type,
        "url": "no-such-page/",
        "agents:pk": str(run.pk),
        "approvals:pk": str(approval.pk),
        "admin:object_id": str(run.pk),  # the view-on-site shortcut, with content_type_id
        "approvals.agentrun": str(run.pk),
        "approvals.approvalrequest": str(approval.pk),
        "agents.effect": str(effect.pk),
    }


def path_of(endpoint: Endpoint, values: dict[str, str]) -> str:
    """The endpoint's path with its parameters naming the planted objects."""
    model_admin = getattr(endpoint.callback, "model_admin", None)

    def value(name: str, regex: str = "") -> str:
        if name == "object_id" and model_admin is not None:
            label = model_admin.model._meta.label_lower
            first = model_admin.model._default_manager.order_by("pk").first()
            return values.get(label) or (str(first.pk) if first else "1")
        if name == "app_label" and regex:
            return regex.split("|")[0]
        namespaced = f"{endpoint.key.partition(':')[0]}:{name}"
        return values.get(namespaced) or values.get(name, "1")

    path = re.sub(r"<(?:\w+:)?(\w+)>", lambda m: value(m.group(1)), endpoint.route)
    path = re.sub(r"\(\?P<(\w+)>([^)]*)\)", lambda m: value(m.group(1), m.group(2)), path)
    return "/" + path


def _client(role: str, people: dict[str, Any]) -> Client:
    client = Client(raise_request_exception=False)  # a server error is an answer like others
    if role != "anonymous":
        client.force_login(people[role])
    return client


def _answer(response: Any) -> Answer:
    if response.status_code == 302:
        location = response["Location"]
        if location.startswith("/admin/login/"):
            return ADMIN_LOGIN
        if location.startswith("/login/"):
            return LOGIN
    return response.status_code


def _body(response: Any) -> str:
    if getattr(response, "streaming", False):
        return b"".join(response.streaming_content).decode(errors="replace")
    return response.content.decode(errors="replace")


def _requests(world: World) -> Iterator[tuple[Endpoint, str, str]]:
    """(endpoint, path, target): a path with parameters once per target object."""
    for endpoint in endpoints():
        parameterised = re.search(r"<|\(\?P", endpoint.route)
        for target in ("critical", "nobody") if parameterised else ("nobody",):
            path = path_of(endpoint, world.values[target])
            yield endpoint, path, target
            for query in VARIANTS.get(endpoint.key, ()):
                yield endpoint, f"{path}?{query}", target


@pytest.mark.parametrize("role", ROLES)
def test_every_url_answers_each_role_by_the_rule_and_leaks_nothing(role, world, request):
    people = {name: request.getfixturevalue(name) for name in SIGNED_IN}
    client = _client(role, people)
    hidden = [m for name, ms in world.markers.items() if role not in SEES[name] for m in ms]
    wrong: list[str] = []
    for endpoint, path, target in _requests(world):
        allowed = expected(endpoint.key, role=role, target=target)
        for method in METHODS:
            response = getattr(client, method)(path)
            answer = _answer(response)
            ok = allowed if method == "get" else allowed | {405}
            if method == "options":  # DRF describes the operation (fields, not data): still read
                ok = ok | {200}
            if answer not in ok:
                wrong.append(f"{method.upper()} {path} [{endpoint.key}]: {answer}, not {ok}")
            leaked = [marker for marker in hidden if marker in _body(response)]
            if leaked:
                wrong.append(f"{method.upper()} {path} [{endpoint.key}] shows {leaked}")
    assert not wrong, f"{role}:\n" + "\n".join(wrong)


def test_the_expectation_table_names_only_urls_that_exist():
    keys = {endpoint.key for endpoint in endpoints()}
    namespaces = {key.partition(":")[0] for key in keys if ":" in key}
    stale = [
        key
        for key in EXPECTED
        if key not in keys and not (key.endswith(":*") and key[:-2] in namespaces)
    ]
    assert not stale


def test_the_walk_reaches_the_admin_and_the_api_docs():
    keys = {endpoint.key for endpoint in endpoints()}
    assert {"admin:index", "admin:approvals_agentrun_change", "api-docs", "api-schema"} <= keys
