# Decision Gate: the production-shaped image (README "Container deployment").
# `gate serve` (gunicorn, threaded workers) with the server extras, as a non-root user.
# The code finds its schemas and data beside its packages, so the source tree is kept as is
# under /app and installed in place.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app
COPY pyproject.toml setup.py README.md LICENSE ./
COPY gate ./gate
COPY api ./api
COPY gate_cli ./gate_cli
COPY workbench ./workbench
COPY schemas ./schemas
COPY data ./data
# gcc only while installing: it compiles the canonical JSON writer (gate/protocol/_canonical.c)
# and the collation loop (gate/protocol/_collation.c), then leaves the image (without them the
# same text and keys are computed in Python, more slowly: contractions in keys then cost a public
# verify up to 45x ASCII, issue 41).
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
 && python -m venv /opt/gate \
 && /opt/gate/bin/pip install --editable '.[server]' \
 && /opt/gate/bin/python -c "import gate.protocol._canonical, gate.protocol._collation" \
 && apt-get purge -y --auto-remove gcc libc6-dev && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/gate --create-home gate \
 && chmod 0700 /var/lib/gate

# GATE_HOME holds the signing keyring (and the SQLite ledger when no GATE_DATABASE_URL is set):
# mount a volume there. Everything else comes from GATE_* variables (`gate serve --help`).
ENV PATH=/opt/gate/bin:$PATH \
    GATE_HOME=/var/lib/gate
VOLUME ["/var/lib/gate"]
USER gate
EXPOSE 8080

HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]

ENTRYPOINT ["gate", "serve"]
CMD ["--host", "0.0.0.0", "--port", "8080", "--workers", "1"]
