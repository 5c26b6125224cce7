"""docs/testing.md shows tests/integration/test_testing_examples.py whole, block by block: the
examples a reader copies are the ones the suite runs."""

from __future__ import annotations

import re

from lineage_assets.settings import PROJECT_ROOT


def test_the_testing_page_shows_the_examples_the_suite_runs():
    page = (PROJECT_ROOT / "docs" / "testing.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```\n", page, flags=re.MULTILINE | re.DOTALL)
    assert "\n\n".join(blocks) == (PROJECT_ROOT / "tests" / "integration" / "test_testing_examples.py").read_text()
