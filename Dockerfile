# memory-ledger's HTTP service (docs/operations.md, "Running in a container").
#
#   docker build -t memory-ledger .
#   docker run -p 8765:8765 -v memory-ledger-data:/data \
#     -e MEMORY_LEDGER_MASTER_KEY=... memory-ledger
#
# The same image runs any other command: `docker run ... memory-ledger jobs run` is the
# scheduler, `... memory-ledger tokens create -n acme/alice --role agent --quiet` a token
# (compose.yaml runs the server, the scheduler and PostgreSQL together).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    MEMORY_LEDGER_DATA_DIR=/data

WORKDIR /app
# What `pip install .` needs: the project file, the readme it names, setup.py (the package
# mapping) and the folders it installs as memory_ledger, memory_ledger.projections, ...
COPY pyproject.toml setup.py README.md ./
COPY memory_ledger ./memory_ledger
COPY projections ./projections
COPY jobs ./jobs
COPY restore ./restore
RUN pip install . \
    && useradd --system --uid 10001 --no-create-home --home-dir /data memory-ledger \
    && mkdir -p /data \
    && chown memory-ledger /data

# Not root. A named volume on /data takes this owner when it is first created.
USER memory-ledger
WORKDIR /data
# The SQLite store (events, projections, tokens), its backups and, without
# MEMORY_LEDGER_MASTER_KEY, the development key beside it; with MEMORY_LEDGER_URL set
# (PostgreSQL), the backups only.
VOLUME ["/data"]
EXPOSE 8765
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8765/v1/health', timeout=2)"]
ENTRYPOINT ["memory-ledger"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8765"]
