# The approval console: one image for the web server, the worker and the one-shot migrate job
# (compose.yaml). Every container runs bin/console, the entry point `make run` uses too.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_ROOT_USER_ACTION=ignore \
    CONSOLE_PYTHON=python \
    CONSOLE_VAR_DIR=/app/var \
    CONSOLE_STATIC_ROOT=/app/staticfiles \
    PORT=8000

WORKDIR /app

# The pinned runtime dependencies of pyproject.toml (not the dev extra), read by the same script
# as the Makefile's venv. Its own layer: rebuilt only when pyproject.toml changes. Every pin has
# a manylinux or pure-Python wheel, so the slim image needs no compiler.
COPY pyproject.toml ./
COPY bin/requirements.py bin/
RUN python bin/requirements.py > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

RUN groupadd --system --gid 10001 console \
    && useradd --system --uid 10001 --gid console --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin console

# The code stays owned by root: the console's user can read it, not change it.
COPY . .
# Static files at build, into the image (CONSOLE_STATIC_ROOT, outside the var/ volume); the
# bytecode too, since the running user cannot write it. var/ is the only writable place.
RUN bin/console static \
    && python -m compileall -q agents approvals audit console core examples \
    && mkdir -p /app/var \
    && chown console:console /app/var

USER console
VOLUME ["/app/var"]
EXPOSE 8000
# /healthz answers 200 while the process serves; the worker's and migrate's containers turn
# this off in compose.yaml (they serve no http).
HEALTHCHECK --interval=30s --timeout=6s --start-period=30s --retries=3 \
    CMD ["/app/bin/console", "healthcheck", "/healthz"]
ENTRYPOINT ["/app/bin/console"]
CMD ["web", "--host", "0.0.0.0"]
