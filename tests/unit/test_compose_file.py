"""``infra/compose.yaml`` says what the stack's services say: ``lineage-assets stack compose`` writes it
from them, and a service changed since without the file rewritten is caught here."""

from __future__ import annotations

from lineage_assets.stack.containers import COMPOSE_FILE, compose_text


def test_the_committed_compose_file_is_the_one_written_from_the_services():
    stale = "infra/compose.yaml is stale: run `lineage-assets stack compose` and commit it"
    assert COMPOSE_FILE.read_text() == compose_text(), stale
