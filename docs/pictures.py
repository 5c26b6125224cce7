"""The pictures in docs/, drawn from the running demo stack (`make demo`, then `make docs`).

`lineage.png` is the project's own page of the event log (`lineage-assets lineage show --png`);
`marquez.png` is Marquez's web UI: the lineage of the `supplier_stats` table with *Full Graph* on,
once every asset job and dataset is drawn. Neither shows a path of the machine it was drawn on.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import sync_playwright

from lineage_assets.datasets import CHECKS, DATASETS, SUPPLIER_STATS
from lineage_assets.settings import PROJECT_ROOT, Settings

DOCS = Path(__file__).resolve().parent


def lineage_page(png: Path) -> None:
    with tempfile.TemporaryDirectory() as folder:
        command = ["lineage", "show", "--out", f"{folder}/lineage.html", "--png", str(png)]
        subprocess.run([str(Path(sys.executable).with_name("lineage-assets")), *command], cwd=PROJECT_ROOT, check=True)


def marquez_lineage(settings: Settings, png: Path) -> None:
    identity = SUPPLIER_STATS.identity(settings)
    url = (
        f"{settings.marquez_web_url}/lineage/dataset/{quote(identity.namespace, safe='')}/"
        f"{quote(identity.name, safe='')}?depth=10"  # deep enough for the archive's check, seven hops away
    )
    jobs = len(DATASETS) + len(CHECKS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(url)
        page.get_by_label("Full Graph").check()
        graph = page.get_by_test_id("zoom-pan-group")
        job_nodes = graph.locator("g:has(> text:text-is('JOB'))")
        job_nodes.nth(jobs - 1).wait_for()
        # Still once the fit-to-view zoom after the layout has ended.
        graph.locator("g:has(> text:text-is('DATASET'))").last.locator("text").nth(1).hover(trial=True)
        page.screenshot(path=png)
        browser.close()


def main() -> int:
    settings = Settings.from_env()
    lineage_page(DOCS / "lineage.png")
    marquez_lineage(settings, DOCS / "marquez.png")
    print(f"wrote {DOCS.relative_to(PROJECT_ROOT)}/lineage.png and marquez.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
