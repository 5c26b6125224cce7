"""The pinned OpenLineage schemas: an offline copy is checked against its pins like a download."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from lineage_assets.settings import PROJECT_ROOT
from tests.openlineage_schemas import LOCK, OFFLINE_SETTING, canonical_sha256, pinned_schemas

PINS = json.loads(LOCK.read_text())["schemas"]


def load_in_a_fresh_interpreter(folder) -> subprocess.CompletedProcess:
    code = "from tests.openlineage_schemas import pinned_schemas; print(len(pinned_schemas()))"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=PROJECT_ROOT,
        env={**os.environ, OFFLINE_SETTING: str(folder)},
        capture_output=True,
        text=True,
        timeout=60,
    )


def copy_of_the_pinned_schemas(folder) -> None:
    for number, schema in enumerate(pinned_schemas().values()):
        (folder / f"{number}.json").write_text(json.dumps(schema, indent=4))  # any layout, any file name


def test_every_pinned_schema_is_had_and_is_what_was_pinned():
    schemas = pinned_schemas()
    assert set(schemas) == set(PINS)
    assert all(canonical_sha256(schemas[url]) == digest for url, digest in PINS.items())
    assert all(schema["$id"] == url for url, schema in schemas.items())


def test_an_offline_folder_is_matched_by_id_whatever_its_layout(tmp_path):
    copy_of_the_pinned_schemas(tmp_path)
    result = load_in_a_fresh_interpreter(tmp_path)
    assert result.returncode == 0 and result.stdout.strip() == str(len(PINS)), result.stderr


def test_an_offline_schema_other_than_its_pin_is_refused_by_name(tmp_path):
    copy_of_the_pinned_schemas(tmp_path)
    core = "https://openlineage.io/spec/2-0-2/OpenLineage.json"
    (changed,) = [p for p in tmp_path.iterdir() if json.loads(p.read_text())["$id"] == core]
    schema = json.loads(changed.read_text())
    schema["description"] = "edited"
    changed.write_text(json.dumps(schema))
    result = load_in_a_fresh_interpreter(tmp_path)
    assert result.returncode != 0
    assert f"the schema {core} from {OFFLINE_SETTING}={tmp_path} is not the one pinned" in result.stderr


def test_an_offline_folder_lacking_a_pinned_schema_names_it(tmp_path):
    copy_of_the_pinned_schemas(tmp_path)
    (missing,) = [p for p in tmp_path.iterdir() if json.loads(p.read_text())["$id"].endswith("/TestRunFacet.json")]
    url = json.loads(missing.read_text())["$id"]
    missing.unlink()
    result = load_in_a_fresh_interpreter(tmp_path)
    assert result.returncode != 0 and f"{OFFLINE_SETTING}={tmp_path} holds no schema with $id {url}" in result.stderr
