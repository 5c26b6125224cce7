"""`make setup` builds Marquez only from its release source: an archive that is not it stops set-up."""

from __future__ import annotations

import os
import subprocess

from lineage_assets.settings import PROJECT_ROOT


def test_an_archive_with_another_checksum_stops_setup_naming_the_setting(tmp_path):
    archive = tmp_path / "marquez-0.51.1.tar.gz"
    archive.write_bytes(b"not Marquez's release source\n")
    extracted = PROJECT_ROOT / ".cache" / "marquez" / "src" / ".extracted"
    before = extracted.read_text() if extracted.exists() else None
    result = subprocess.run(
        ["make", "-s", "setup"],
        cwd=PROJECT_ROOT,
        env={**os.environ, "LINEAGE_ASSETS_MARQUEZ_SOURCE": str(archive)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert f"LINEAGE_ASSETS_MARQUEZ_SOURCE={archive}: the archive's sha256 is" in output, output
    # Nothing of the build it stopped was replaced.
    assert (extracted.read_text() if extracted.exists() else None) == before
