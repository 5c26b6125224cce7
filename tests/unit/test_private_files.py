"""Owner-only folders and files: what holds a credential is the owner's from its first byte."""

from __future__ import annotations

import stat

from lineage_assets.private_files import private_folder, write_private


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_folder_is_narrowed_to_its_owner_but_keeps_the_passage_a_server_was_given(tmp_path):
    assert mode(private_folder(tmp_path / "new")) == 0o700
    shared = tmp_path / "old"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    # Others may no longer list or read it; PostgreSQL's user still reaches its own folder inside.
    assert mode(private_folder(shared)) == 0o711


def test_a_private_file_is_the_owners_even_when_it_existed_readable(tmp_path):
    existing = tmp_path / "s3proxy.properties"
    existing.write_text("old")
    existing.chmod(0o644)
    write_private(existing, "s3proxy.credential=secret\n")
    assert mode(existing) == 0o600 and existing.read_text() == "s3proxy.credential=secret\n"
