# Decision Gate: the production-shaped image (README "Container deployment").
# `gate serve` (gunicorn, threaded workers) with the server extras, as a non-root user.
# Two stages: the first builds the project's wheel (the code, its contract schemas and data as
# package data, the compiled extensions); the second installs that wheel, never the source tree,
# so the image runs exactly what `pip install decision_gate-*.whl` runs anywhere.
FROM python:3.11-slim AS build

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE ./
COPY gate ./gate
COPY api ./api
COPY gate_cli ./gate_cli
COPY gate_client ./gate_client
COPY workbench ./workbench
# gcc only in this stage: it compiles the canonical JSON writer (gate/protocol/_canonical.c) and
# the collation loop (gate/protocol/_collation.c) into the wheel (without them the same text and
# keys are computed in Python, more slowly: contractions in keys then cost a public verify up to
# 45x ASCII, issue 41). The wheel must carry both, or the build stops here.
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
 && pip wheel --no-deps --wheel-dir /wheels . \
 && python -c "import glob, zipfile; names = zipfile.ZipFile(glob.glob('/wheels/decision_gate-*.whl')[0]).namelist(); \
assert all(any(n.startswith('gate/protocol/' + ext) and n.endswith('.so') for n in names) for ext in ('_canonical', '_collation')); \
assert 'gate/schemas/rulebook-v1.schema.json' in names and 'gate/data/rulebooks/refund-approval.json' in names"

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY --from=build /wheels /tmp/wheels
RUN python -m venv /opt/gate \
 && /opt/gate/bin/pip install "$(echo /tmp/wheels/decision_gate-*.whl)[server]" \
 && /opt/gate/bin/python -c "import gate.protocol._canonical, gate.protocol._collation" \
 && rm -rf /tmp/wheels \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/gate --create-home gate \
 && chmod 0700 /var/lib/gate

# GATE_HOME holds the signing keyring (and the SQLite ledger when no GATE_DATABASE_URL is set):
# mount a volume there. Everything else comes from GATE_* variables (`gate serve --help`).
ENV PATH=/opt/gate/bin:$PATH \
    GATE_HOME=/var/lib/gate
WORKDIR /var/lib/gate
VOLUME ["/var/lib/gate"]
USER gate
EXPOSE 8080

HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]

ENTRYPOINT ["gate", "serve"]
CMD ["--host", "0.0.0.0", "--port", "8080", "--workers", "1"]
