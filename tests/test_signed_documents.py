"""A backup's manifest and a drill's report are signed with the ledger's key, so an ops
team's evidence is checked as a compliance pack is: by the standalone verifier, with the
file alone (its public key inside, its key id known from the ledger or a kept head).
Any changed value fails; a document re-signed with another key fails against the
expected key id; a restore refuses a manifest whose signature does not hold."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from factories import fact
from typer.testing import CliRunner
from waits import HUNG

from memory_ledger.api import MemoryService
from memory_ledger.audit import verifier
from memory_ledger.audit.heads import AuditKey
from memory_ledger.audit.signed import signed
from memory_ledger.cli import app
from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey
from memory_ledger.errors import ConfigurationError
from memory_ledger.principal import Principal
from memory_ledger.restore.backup import MANIFEST, create, verify
from memory_ledger.restore.drill import drill

VERIFIER = Path(verifier.__file__)


def _offline(document: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    """The verifier as an auditor runs it: a copy of the one file, `python -I`."""
    copy = document.parent / "verifier_copy.py"
    shutil.copy(VERIFIER, copy)
    return subprocess.run(
        [sys.executable, "-I", str(copy), "--document", str(document), *extra],
        capture_output=True,
        text=True,
        timeout=HUNG,
    )


@pytest.fixture
def store(tmp_path: Path) -> Settings:
    settings = Settings.resolve(tmp_path / "data")
    with MemoryService(settings) as service:
        service.for_principal(Principal("acme", "alice")).remember(fact("city", "Lyon"))
    return settings


def test_a_backup_manifest_is_signed_and_checked_offline(store: Settings, tmp_path: Path) -> None:
    with MemoryService(store) as service:
        master = service.log.master
        made = create(store, master, service.ledger, datetime.now(UTC))
    path = made.path / MANIFEST
    raw = json.loads(path.read_text())
    key = AuditKey(master)
    assert raw["signature"]["key_id"] == key.key_id
    assert not verifier.check_document(raw, key.key_id)
    done = _offline(path, "--key-id", key.key_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "signed backup manifest holds" in done.stdout

    raw["restore_point"]["position"] += 1  # any value changed
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(raw))
    done = _offline(changed)
    assert done.returncode == verifier.EXIT_FAILED
    assert "bad_document_signature" in done.stdout


def test_a_manifest_re_signed_with_another_key_fails_and_is_not_restored(
    store: Settings, tmp_path: Path
) -> None:
    with MemoryService(store) as service:
        master = service.log.master
        made = create(store, master, service.ledger, datetime.now(UTC))
    raw = json.loads((made.path / MANIFEST).read_text())
    forged = signed("backup manifest", raw, MasterKey.generate())  # holds for its own key
    assert not verifier.check_document(forged)
    reasons = [r for r, _ in verifier.check_document(forged, AuditKey(master).key_id)]
    assert reasons == ["unexpected_key"]
    copy = tmp_path / "forged"
    shutil.copytree(made.path, copy)
    (copy / MANIFEST).write_text(json.dumps(forged))
    with pytest.raises(ConfigurationError, match="signature does not hold"):
        verify(copy, master)
    assert verify(made.path, master).manifest.backup_id == made.manifest.backup_id


def test_a_drill_report_and_its_markdown_are_signed_and_a_changed_finding_fails(
    store: Settings,
) -> None:
    with MemoryService(store) as service:
        made = create(store, service.log.master, service.ledger, datetime.now(UTC))
        report = drill(
            service, datetime.now(UTC), made.path, run_by="ops", open_store=MemoryService
        )
        key_id = AuditKey(service.log.master).key_id
    assert report.outcome == "passed", report.findings
    document, markdown = (Path(f) for f in report.report_files)
    assert document.name.endswith(f"-{report.drill_id}.json")
    assert markdown.name.endswith(f"-{report.drill_id}.md")
    assert _offline(document, "--key-id", key_id).returncode == 0
    runner = CliRunner()
    done = runner.invoke(app, ["audit", "verify-document", str(document), "--key-id", key_id])
    assert done.exit_code == 0, done.output

    # Issue 35 (9): the markdown to attach to a ticket is checked the same way, alone.
    text = markdown.read_text()
    assert text.startswith(report.markdown())
    done = _offline(markdown, "--key-id", key_id)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "signed drill report markdown holds" in done.stdout
    markdown.write_text(text.replace("PASSED", "FAILED", 1))
    done = runner.invoke(app, ["audit", "verify-document", str(markdown), "--json"])
    assert done.exit_code == verifier.EXIT_FAILED, done.output
    assert json.loads(done.output)["failures"][0]["reason"] == "bad_document_signature"
    markdown.write_text(report.markdown())  # its signature line cut off
    done = runner.invoke(app, ["audit", "verify-document", str(markdown), "--json"])
    assert json.loads(done.output)["failures"][0]["reason"] == "malformed"

    raw = json.loads(document.read_text())
    raw["outcome"] = "failed" if raw["outcome"] == "passed" else "passed"
    document.write_text(json.dumps(raw))
    done = runner.invoke(app, ["audit", "verify-document", str(document), "--json"])
    assert done.exit_code == verifier.EXIT_FAILED
    assert json.loads(done.output)["failures"][0]["reason"] == "bad_document_signature"


def test_the_scheduled_head_is_kept_and_a_later_pack_extends_it(store: Settings) -> None:
    """The `audit-head` job signs the ledger's head and keeps it, one line per run; a
    pack made after more entries shows the kept head's tree is a prefix of its own."""
    from memory_ledger.audit.heads import Auditor
    from memory_ledger.audit.pack import build_pack
    from memory_ledger.jobs.audit_head import HEADS_FILE
    from memory_ledger.jobs.registry import JOBS

    with MemoryService(store) as service:
        first = JOBS["audit-head"].run(service, datetime.now(UTC), None)
        ledger = service.for_principal(Principal("acme", "alice"))
        item = ledger.remember(fact("badge", "B-7731")).item_id
        request_id = ledger.forget(item).request_id
        second = JOBS["audit-head"].run(service, datetime.now(UTC), None)
        lines = (store.data_dir / HEADS_FILE).read_text().splitlines()
        assert [json.loads(line)["size"] for line in lines] == [first["size"], second["size"]]
        assert second["size"] > first["size"]
        kept = json.loads(lines[0])
        auditor = Auditor(service.ledger, service.log.master)
        pack = build_pack(auditor, request_id, since=[kept["size"]])
    assert not verifier.check_pack(pack, kept, kept["key_id"])
