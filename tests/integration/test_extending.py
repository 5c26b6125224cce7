"""docs/extending.md followed in a copy of the project: the page's blocks added to the files they name,
as the page says, the design accepted, and the new dataset's lineage in the test stack's Marquez
before anything runs: its job between its input and its table, the table's columns."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys

from lineage_assets.datasets import iceberg_identity
from lineage_assets.lineage.marquez import MarquezApi, dataset_node
from lineage_assets.settings import PROJECT_ROOT
from lineage_assets.settings_environment import as_environment
from lineage_assets.testing import pipeline_of_its_own
from tests.marquez_graph import job_node

NEW = "lakehouse/tier_revenue"


def project_copy(folder) -> None:
    """The checkout's tracked files, as a clone has them, in ``folder``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=PROJECT_ROOT, capture_output=True, check=True).stdout
    for name in listed.decode().split("\0"):
        if name and (PROJECT_ROOT / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(PROJECT_ROOT / name, folder / name)


def test_a_daily_table_added_as_the_page_says_has_its_designed_lineage_and_is_in_marquez(stack, settings, tmp_path):
    page = (PROJECT_ROOT / "docs" / "extending.md").read_text()
    blocks = re.findall(r"^```python (\S+)\n(.*?)^```\n", page, flags=re.MULTILINE | re.DOTALL)
    assert [path for path, _ in blocks] == ["spark/transforms.py", "lineage_assets/datasets.py"]
    copy = tmp_path / "project"
    project_copy(copy)
    for path, code in blocks:  # each at the end of the file the page names
        with (copy / path).open("a") as file:
            file.write(f"\n\n{code}")
    own = pipeline_of_its_own(settings, "extending")  # its lineage in a namespace of its own
    env = {**os.environ, **as_environment(own), "PYTHONPATH": str(copy)}

    def lineage_assets(*arguments: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "lineage_assets.cli", "lineage", *arguments],
            cwd=copy,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )

    accepted = lineage_assets("accept", NEW)
    assert accepted.returncode == 0, accepted.stderr[-3000:]
    assert f"lineage accept: {NEW} changed" in accepted.stdout
    designed = json.loads((copy / "lineage_assets" / "designed_lineage.json").read_text())
    assert designed[NEW]["columns"]["revenue"] == {
        "derivation": "cast(sum(lakehouse/supplier_revenue.revenue) as decimal(14,2))",
        "inputs": ["DIRECT/AGGREGATION lakehouse/supplier_revenue.revenue"],
    }
    assert designed[NEW]["columns"]["tier"]["inputs"] == ["DIRECT/IDENTITY lakehouse/supplier_revenue.tier"]
    assert (
        "FILTER lakehouse/supplier_revenue.bid_date: rows where (lakehouse/supplier_revenue.bid_date = :day)"
        in (designed[NEW]["rows"])
    )
    # The checkout's own design is untouched: the copy is the one that changed.
    assert NEW not in json.loads((PROJECT_ROOT / "lineage_assets" / "designed_lineage.json").read_text())

    published = lineage_assets("publish")
    assert published.returncode == 0, published.stderr[-3000:]
    delivered = lineage_assets("flush", "--timeout", "90")  # the events go through the durable log
    assert delivered.returncode == 0, delivered.stderr[-3000:]
    # Before any run, Marquez draws the new job between its input and its table, with the table's columns.
    marquez = MarquezApi.of(own)
    table = iceberg_identity("tier_revenue")(own)
    revenue = iceberg_identity("supplier_revenue")(own)
    job = job_node(own.lineage_namespace, "dagster.daily-tier-revenue")
    edges = {
        (node["id"], edge["destination"]) for node in marquez.lineage(*table.node)["graph"] for edge in node["outEdges"]
    }
    assert {(dataset_node(*revenue.node), job), (job, dataset_node(*table.node))} <= edges
    assert [field["name"] for field in marquez.dataset(*table.node)["fields"]] == ["bid_date", "tier", "revenue"]
