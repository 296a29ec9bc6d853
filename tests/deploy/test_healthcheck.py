"""console/healthcheck.py: the request the container's health check sends."""

from __future__ import annotations

from console.healthcheck import check, host_header, proxy_headers, request_parts
from tests.support.processes import free_port


def test_health_check_names_the_first_allowed_host():
    assert host_header("console.example.com,10.0.0.5") == "console.example.com"


def test_health_check_turns_a_subdomain_wildcard_into_its_domain_and_skips_star():
    assert host_header("*, .example.com") == "example.com"
    assert host_header("*") == "localhost"


def test_health_check_uses_localhost_when_allowed_hosts_is_unset():
    assert host_header(None) == "localhost"


def test_health_check_sends_the_https_header_of_a_tls_terminating_proxy():
    assert proxy_headers("HTTP_X_FORWARDED_PROTO") == {"X-Forwarded-Proto": "https"}
    assert proxy_headers("HTTP_X_FORWARDED_SSL,on") == {"X-Forwarded-Ssl": "on"}
    assert proxy_headers("") == {}


def test_health_check_asks_the_configured_port_and_path():
    port, path, headers = request_parts(
        {"PORT": "9001", "ALLOWED_HOSTS": "a.test", "SECURE_PROXY_SSL_HEADER": ""}, "/readyz"
    )
    assert (port, path, headers) == (9001, "/readyz", {"Host": "a.test"})
    assert request_parts({}, "/healthz")[0] == 8000


def test_health_check_fails_when_nothing_listens():
    healthy, said = check({"PORT": str(free_port())})
    assert not healthy
    assert "/healthz" in said
