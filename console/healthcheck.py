"""The container's health check: ask the local web server for a page, exit 0 on 200.

Run by ``bin/console healthcheck [path]`` (the Dockerfile's HEALTHCHECK) every few seconds, so it
uses the standard library only and never loads Django. The request must pass the checks a real
one passes: it names a host the console serves (the first of ALLOWED_HOSTS), and behind a proxy
that terminates TLS it carries the proxy's https header (SECURE_PROXY_SSL_HEADER), else the
console would answer 400 or redirect to https.
"""

from __future__ import annotations

import http.client
import os
import sys
from collections.abc import Mapping

DEFAULT_PATH = "/healthz"
TIMEOUT_SECONDS = 5.0
# console/settings.py's defaults for the variables read here.
DEFAULT_PORT = "8000"
DEFAULT_HOST = "localhost"


def host_header(allowed_hosts: str | None) -> str:
    """A Host the console accepts: the first usable ALLOWED_HOSTS entry (unset: localhost)."""
    if allowed_hosts is None:
        return DEFAULT_HOST
    for entry in (item.strip() for item in allowed_hosts.split(",")):
        if entry and entry != "*":
            # ".example.com" allows example.com and its subdomains.
            return entry.removeprefix(".")
    return DEFAULT_HOST


def proxy_headers(proxy_ssl_header: str) -> dict[str, str]:
    """The header a TLS-terminating proxy adds, from SECURE_PROXY_SSL_HEADER's Django spelling."""
    name, _, value = (part.strip() for part in proxy_ssl_header.partition(","))
    if not name.startswith("HTTP_"):
        return {}
    header = "-".join(word.capitalize() for word in name.removeprefix("HTTP_").split("_"))
    return {header: value or "https"}


def request_parts(environ: Mapping[str, str], path: str) -> tuple[int, str, dict[str, str]]:
    """(port, path, headers) of the check, from the same environment the console reads."""
    port = int(environ.get("PORT") or DEFAULT_PORT)
    headers = {"Host": host_header(environ.get("ALLOWED_HOSTS"))}
    headers.update(proxy_headers(environ.get("SECURE_PROXY_SSL_HEADER", "")))
    return port, path, headers


def check(environ: Mapping[str, str], path: str = DEFAULT_PATH) -> tuple[bool, str]:
    """(healthy, what happened): healthy only on a 200 from 127.0.0.1:PORT."""
    port, path, headers = request_parts(environ, path)
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_SECONDS)
    try:
        connection.request("GET", path, headers=headers)
        status = connection.getresponse().status
    except OSError as exc:
        return False, f"GET http://127.0.0.1:{port}{path}: {exc}"
    finally:
        connection.close()
    return status == 200, f"GET http://127.0.0.1:{port}{path}: HTTP {status}"


def main(argv: list[str]) -> int:
    healthy, said = check(os.environ, argv[0] if argv else DEFAULT_PATH)
    print(said, file=sys.stdout if healthy else sys.stderr)
    return 0 if healthy else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
