"""A clone stands alone: nothing the project runs or tests reads outside its checkout by default.

Only CI's provisioning (`.ci/run`) may point the two offline settings at copies beside the checkout;
everything else gets third-party files by their published URLs, pinned by checksum."""

from __future__ import annotations

import re
import subprocess

from lineage_assets.settings import PROJECT_ROOT

BESIDE_THE_CHECKOUT = re.compile(r"\.\./shared|PROJECT_ROOT\.parent\b|parent\s*/\s*['\"]shared['\"]")


def test_only_ci_provisioning_reads_beside_the_checkout():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True, check=True).stdout
    readers = []
    for name in filter(None, listed.decode().split("\0")):
        path = PROJECT_ROOT / name
        if path.is_file() and BESIDE_THE_CHECKOUT.search(path.read_text(errors="ignore")):
            readers.append(name)
    assert readers == [".ci/run"]
