"""Dockerfile, compose.yaml and .dockerignore agree with the code, checked without Docker:
every command they run is a `memory-ledger` command with options it has, every
`MEMORY_LEDGER_` variable they set is one the code reads, the database URL names the
compose database, what the image copies is what `pip install .` needs. Where a Docker
daemon and `docker compose` answer, the image is built and the four services started;
without them only that part is skipped, saying why."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import typer.main
import yaml  # PyYAML: a test dependency (pyproject.toml)

from memory_ledger._source_tree import MAPPED
from memory_ledger.cli import app
from memory_ledger.cli.serve import LOG_LEVEL_ENV
from memory_ledger.config import DATA_DIR_ENV, URL_ENV, Settings
from memory_ledger.crypto import MASTER_KEY_ENV

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE = ROOT / "compose.yaml"
DOCKERIGNORE = ROOT / ".dockerignore"
SERVICES = {"server-a", "server-b", "scheduler", "postgres"}
SERVERS = {"server-a": "8765", "server-b": "8766"}  # each one's port on the host
PROCESSES = ("server-a", "server-b", "scheduler")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    found = []
    for line in joined.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def instruction(name: str) -> list[str]:
    return [rest for word, rest in dockerfile_instructions() if word == name]


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))


def interpolated(value: str) -> str:
    """A compose value with `${NAME:-default}` as its default, `${NAME:?...}` as NAME."""
    value = re.sub(r"\$\{(\w+):-([^}]*)\}", r"\2", value)
    return re.sub(r"\$\{(\w+)(?::?\?[^}]*)?\}", r"\1", value)


def check_command(args: list[str]) -> str:
    """The `memory-ledger` command `args` names (`jobs run`), its options parsed as the
    CLI parses them (an unknown command or option fails here); the command is not run."""
    group = typer.main.get_command(app)
    ctx = group.context_class(group, info_name="memory-ledger")
    command: Any = group
    rest, names = list(args), []
    while hasattr(command, "get_command"):  # a group (typer's own click: no isinstance)
        assert rest, f"{args}: names a group, not a command"
        name, rest = rest[0], rest[1:]
        sub = command.get_command(ctx, name)
        assert sub is not None, f"memory-ledger has no command {name!r} ({args})"
        names.append(name)
        ctx = sub.context_class(sub, info_name=name, parent=ctx)
        command = sub
    # an option the command does not have, or a value it refuses, is an error here
    command.make_context(names[-1], list(rest), parent=ctx.parent)
    return " ".join(names)


def env_vars_the_code_reads() -> set[str]:
    names = {DATA_DIR_ENV, URL_ENV, MASTER_KEY_ENV, LOG_LEVEL_ENV}
    group = typer.main.get_command(app)

    def walk(command: Any) -> None:
        for param in command.params:
            envvar = getattr(param, "envvar", None)
            names.update([envvar] if isinstance(envvar, str) else envvar or [])
        if hasattr(command, "list_commands"):
            ctx = command.context_class(command)
            for name in command.list_commands(ctx):
                walk(command.get_command(ctx, name))

    walk(group)
    return names


# -- the Dockerfile ------------------------------------------------------------------


def test_the_image_is_python_311_slim_and_runs_serve_on_all_interfaces() -> None:
    assert instruction("FROM") == ["python:3.11-slim"]
    entrypoint = json.loads(instruction("ENTRYPOINT")[-1])
    cmd = json.loads(instruction("CMD")[-1])
    assert entrypoint == ["memory-ledger"]
    assert cmd[:3] == ["serve", "--host", "0.0.0.0"]
    assert check_command(cmd) == "serve"
    port = cmd[cmd.index("--port") + 1]
    assert instruction("EXPOSE") == [port]
    assert f"127.0.0.1:{port}/v1/health" in instruction("HEALTHCHECK")[0]


def test_the_image_runs_as_a_user_with_the_data_dir_a_volume() -> None:
    users = instruction("USER")
    assert users and users[-1] not in ("root", "0")
    (volume,) = json.loads(instruction("VOLUME")[0])
    env = " ".join(instruction("ENV"))
    assert f"{DATA_DIR_ENV}={volume}" in env
    assert f"chown {users[-1]} {volume}" in " ".join(instruction("RUN"))


def test_the_image_copies_what_pip_install_needs_and_dockerignore_keeps_it() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    copied = {
        source
        for rest in instruction("COPY")
        for source in shlex.split(rest)[:-1]
        if not source.startswith("--")
    }
    assert {"pyproject.toml", project["project"]["readme"]} <= copied
    # setup.py's package mapping: the package and the three folders that install inside it
    assert {"setup.py", "memory_ledger", *MAPPED} <= copied
    for source in copied:
        assert (ROOT / source).exists(), source
    ignored = {
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".git", ".venv", "tests"} <= ignored
    assert not ignored & copied, "a file the image copies is ignored"


# -- compose.yaml --------------------------------------------------------------------


def test_compose_runs_two_servers_the_scheduler_and_postgresql() -> None:
    services = compose()["services"]
    assert set(services) == SERVICES
    postgres = services["postgres"]
    assert postgres["image"].startswith("postgres:")
    assert "pg_isready" in " ".join(postgres["healthcheck"]["test"])
    assert check_command(services["scheduler"]["command"]) == "jobs run"
    for name in PROCESSES:
        service = services[name]
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"
        assert "build" in service or "image" in service
    for name, published in SERVERS.items():
        command = services[name]["command"]
        assert check_command(command) == "serve"
        assert command[command.index("--host") + 1] == "0.0.0.0"
        port = command[command.index("--port") + 1]
        assert port == "8765"  # inside the container: what the image's health check asks
        assert services[name]["ports"] == [f"127.0.0.1:{published}:{port}"]
    assert services["scheduler"]["healthcheck"]["disable"] is True  # it serves no HTTP


def test_each_process_has_a_data_directory_of_its_own_and_shares_the_backups() -> None:
    """Each process stands for a machine: its own vector index, caches and host id
    (docs/operations.md, "Several processes on one PostgreSQL"); a backup taken by one
    can be restored through another."""
    services = compose()["services"]
    data, backups = {}, set()
    for name in PROCESSES:
        volumes = services[name]["volumes"]
        data[name] = next(v.split(":")[0] for v in volumes if v.endswith(":/data"))
        backups |= {v.split(":")[0] for v in volumes if v.endswith(":/data/backups")}
    assert len(set(data.values())) == len(PROCESSES)
    assert len(backups) == 1
    assert set(compose()["volumes"]) == {*data.values(), *backups, "postgres-data"}


def test_compose_sets_only_variables_the_code_reads_and_a_url_to_its_database() -> None:
    services = compose()["services"]
    known = env_vars_the_code_reads()
    pg_env = {k: interpolated(str(v)) for k, v in services["postgres"]["environment"].items()}
    for name in PROCESSES:
        env = {k: interpolated(str(v)) for k, v in services[name]["environment"].items()}
        for variable in env:
            assert variable in known, f"{name}: nothing reads {variable}"
        assert MASTER_KEY_ENV in env  # both open the same sealed store
        settings = Settings.resolve(env.get(DATA_DIR_ENV), env[URL_ENV])
        pg = settings.postgres
        assert pg is not None, env[URL_ENV]
        assert (pg.host, pg.port) == ("postgres", 5432)
        assert pg.user == pg_env["POSTGRES_USER"] and pg.dbname == pg_env["POSTGRES_DB"]
        assert pg.password == pg_env["POSTGRES_PASSWORD"]
        assert pg.password not in settings.describe()
        volumes = services[name]["volumes"]
        assert any(v.endswith(f":{env[DATA_DIR_ENV]}") for v in volumes)


# -- with Docker ---------------------------------------------------------------------


def _docker_unavailable() -> str | None:
    """Why the image cannot be built and started here, or None when it can."""
    if shutil.which("docker") is None:
        return "docker is not on PATH"
    probes = [
        (["docker", "info"], "no Docker daemon answers (docker info failed)"),
        (["docker", "compose", "version"], "docker compose is not installed"),
    ]
    for probe, what in probes:
        try:
            done = subprocess.run(probe, capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return what
        if done.returncode != 0:
            return what
    return None


@pytest.mark.slow
def test_the_image_builds_and_compose_serves(tmp_path: Path) -> None:
    why = _docker_unavailable()
    if why is not None:
        pytest.skip(f"building the image and starting compose needs Docker: {why}")
    import base64
    import os
    import secrets

    import httpx

    env = {
        **os.environ,
        MASTER_KEY_ENV: base64.b64encode(secrets.token_bytes(32)).decode(),
        "COMPOSE_PROJECT_NAME": f"mltest{secrets.token_hex(3)}",
    }
    compose_cmd = ["docker", "compose", "-f", str(COMPOSE)]

    def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*compose_cmd, *args], env=env, cwd=ROOT, capture_output=True,
                              text=True, timeout=timeout)  # fmt: skip

    try:
        up = run("up", "-d", "--build", "--wait", "postgres", "server-a", "server-b", "scheduler")
        assert up.returncode == 0, up.stderr
        made = run("exec", "-T", "server-a", "memory-ledger", "tokens", "create", "-n",
                   "acme/alice", "--role", "agent", "--quiet", timeout=120)  # fmt: skip
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()
        deadline = time.monotonic() + 120
        while True:
            try:
                auth = {"Authorization": f"Bearer {token}"}
                answer = httpx.get("http://127.0.0.1:8765/v1/summary", headers=auth, timeout=5)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline
                time.sleep(1)
        assert answer.status_code == 200, answer.text
        for port in SERVERS.values():  # the other server answers the same token
            other = httpx.get(f"http://127.0.0.1:{port}/v1/summary", headers=auth, timeout=30)
            assert other.status_code == 200, other.text
        logs = run("logs", "server-a", timeout=60).stdout
        assert "serving on http://0.0.0.0:8765" in logs and "GET /v1/summary 200" in logs
        assert "store: PostgreSQL postgresql://memory_ledger:***@postgres:5432" in logs
        assert token not in logs
        scheduler = run("ps", "--status", "running", "--services", timeout=60).stdout.split()
        assert "scheduler" in scheduler
    finally:
        run("down", "-v", timeout=300)
