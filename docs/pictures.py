"""The pictures in docs/, drawn from a fresh stack of their own (`make docs`).

On a stack beside the default one (state `.state/docs`, ports shifted by 3000), started empty:
`marquez-design.png` is Marquez's web UI once the stack is up and the design is published, before
anything ran; then the demo runs, and `lineage.png` is the project's own page of the event log
(`lineage-assets lineage show --png`) and `marquez.png` Marquez's UI with the runs. Each Marquez
picture is the lineage of the `supplier_stats` table with *Full Graph* on, once every job and
dataset is drawn. None shows a path of the machine it was drawn on.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from urllib.parse import quote

from playwright.sync_api import sync_playwright

from lineage_assets.datasets import CHECKS, DATASETS, SUPPLIER_STATS
from lineage_assets.settings import PROJECT_ROOT, Settings
from lineage_assets.settings_environment import as_environment, settings_from_env

DOCS = Path(__file__).resolve().parent
PORT_OFFSET = 3000  # clear of the default ports, the tests' (10000 away) and the benchmarks' (10600); below 32768
DEMO_SEED = 7


def lineage_assets(settings: Settings, *arguments: str) -> None:
    command = [str(Path(sys.executable).with_name("lineage-assets")), *arguments]
    subprocess.run(command, cwd=PROJECT_ROOT, env={**os.environ, **as_environment(settings)}, check=True)


def marquez_lineage(settings: Settings, png: Path) -> None:
    identity = SUPPLIER_STATS.identity(settings)
    url = (
        f"{settings.marquez_web_url}/lineage/dataset/{quote(identity.namespace, safe='')}/"
        f"{quote(identity.name, safe='')}?depth=10"  # deep enough for the archive's check, seven hops away
    )
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(url)
        page.get_by_label("Full Graph").check()
        graph = page.get_by_test_id("zoom-pan-group")
        graph.locator("g:has(> text:text-is('JOB'))").nth(len(DATASETS) + len(CHECKS) - 1).wait_for()
        # Still once the fit-to-view zoom after the layout has ended.
        graph.locator("g:has(> text:text-is('DATASET'))").last.locator("text").nth(1).hover(trial=True)
        page.screenshot(path=png)
        browser.close()


def main() -> int:
    settings = settings_from_env().beside("docs", PORT_OFFSET)
    lineage_assets(settings, "stack", "down")
    shutil.rmtree(settings.state_dir, ignore_errors=True)
    try:
        lineage_assets(settings, "stack", "up")  # which publishes the design
        lineage_assets(settings, "lineage", "flush", "--timeout", "60")
        marquez_lineage(settings, DOCS / "marquez-design.png")
        lineage_assets(settings, "demo", "--seed", str(DEMO_SEED))
        with tempfile.TemporaryDirectory() as folder:
            lineage_assets(
                settings, "lineage", "show", "--out", f"{folder}/lineage.html", "--png", str(DOCS / "lineage.png")
            )
        marquez_lineage(settings, DOCS / "marquez.png")
    finally:
        lineage_assets(settings, "stack", "down")
    print("wrote docs/marquez-design.png, docs/lineage.png and docs/marquez.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
