"""A Spark application nested under an asset's lineage run: openlineage-spark's settings for it, and
its agent's events forwarded into the project's log."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openlineage.client.event_v2 import RunState
from openlineage.client.facet_v2 import error_message_run
from openlineage.client.serde import Serde

from lineage_assets.datasets import ORCHESTRATOR_JOB, Dataset
from lineage_assets.lineage import events
from lineage_assets.lineage.emitter import LineageEmitter
from lineage_assets.settings import Settings

LISTENER = "io.openlineage.spark.agent.OpenLineageSparkListener"  # openlineage-spark
# Root nodes (optimized logical plans) of Spark actions whose lineage says nothing of the asset: the
# table's creation, and the job's reads of the table's metadata and of its own totals for its report.
ACTIONS_WITHOUT_LINEAGE = tuple(
    f"org.apache.spark.sql.catalyst.plans.logical.{node}" for node in ("CreateTable", "GlobalLimit", "Sort")
)


def agent_conf(events_file: Path) -> dict[str, str]:
    """openlineage-spark loaded on a Spark application, writing its events to ``events_file``."""
    return {
        "spark.extraListeners": LISTENER,
        "spark.openlineage.transport.type": "file",
        "spark.openlineage.transport.location": str(events_file),
        # Its Iceberg metrics reporter looks a write's catalog up in a field that Spark 4 holds as
        # an Option, and fails (ClassCastException, logged as an ERROR) at every Iceberg action; the
        # jobs read the tables' statistics themselves.
        "spark.openlineage.vendors.iceberg.metricsReporterDisabled": "true",
    }


@dataclass(frozen=True)
class SparkApplication:
    """The Spark application of one asset run (``run_id``) of ``dataset`` under the Dagster run
    ``root_run_id``."""

    settings: Settings
    dataset: Dataset
    run_id: str
    root_run_id: str

    @property
    def events_file(self) -> Path:
        return self.settings.lineage_dir / "spark" / f"{self.run_id}.jsonl"

    def conf(self) -> dict[str, str]:
        """openlineage-spark configuration nesting the application under the asset's run.

        The agent names the application's job after the application, and Marquez shows it under the
        asset's job (``dagster.daily-supplier-stats.daily_supplier_stats_spark``). Its actions' events
        are evidence only (``forward_events``): each would otherwise be a job of its own in the graph
        (a second writer of the asset's table, a reader of its metadata tables)."""
        namespace = self.settings.lineage_namespace
        return {
            **agent_conf(self.events_file),  # its events then join the project's log and sender
            "spark.openlineage.namespace": namespace,
            "spark.app.name": self.dataset.job.spark_application,
            "spark.openlineage.parentJobNamespace": namespace,
            "spark.openlineage.parentJobName": self.dataset.job.lineage_name,
            "spark.openlineage.parentRunId": self.run_id,
            "spark.openlineage.rootParentJobNamespace": namespace,
            "spark.openlineage.rootParentJobName": ORCHESTRATOR_JOB,
            "spark.openlineage.rootParentRunId": self.root_run_id,
            # The agent's list syntax: [a;b;c].
            "spark.openlineage.filter.deniedSparkNodes": f"[{';'.join(ACTIONS_WITHOUT_LINEAGE)}]",
            # Filters and group-by keys as the facet's dataset-wide inputs: otherwise a column of no
            # direct input (COUNT(*)) is left out with the rows that shape it.
            "spark.openlineage.columnLineage.datasetLineageEnabled": "true",
        }

    def forward_events(
        self, emitter: LineageEmitter, state: RunState = RunState.COMPLETE, error: BaseException | None = None
    ) -> AgentEvidence:
        """Forward the application's events into the log, and keep its actions' as evidence: the
        column lineage the agent derived for what the job wrote (a witness of the job's own). When the
        asset run ends ``state`` ABORT or FAIL, the application's COMPLETE takes that state: a stopped driver shuts its
        SparkContext down normally, and the agent reports any such end COMPLETE, which the application
        was not."""
        evidence = AgentEvidence()
        if not self.events_file.exists():
            return evidence
        output = self.dataset.identity(self.settings).node
        for line in (line for line in self.events_file.read_text().splitlines() if line.strip()):
            event = json.loads(line)
            if event["job"]["name"] != self.dataset.job.spark_application:  # an action of the application
                for written in event.get("outputs") or []:
                    facets = written.get("facets") or {}
                    if facets.get("columnLineage") and (written["namespace"], written["name"]) == output:
                        evidence.column_lineage = facets["columnLineage"]
                        evidence.columns = [f["name"] for f in (facets.get("schema") or {}).get("fields", [])]
                continue
            if state != RunState.COMPLETE and event.get("eventType") == RunState.COMPLETE.value:
                event["eventType"] = state.value
                context = f"the asset run ended {state.value} while the Spark application ran"
                # With no error to describe, the facet still says why the application's COMPLETE is not one.
                facet = (
                    events.error_facet(error, context)
                    if error is not None
                    else error_message_run.ErrorMessageRunFacet(message=context, programmingLanguage="PYTHON")
                )
                event["run"].setdefault("facets", {})["errorMessage"] = Serde.to_dict(facet)
                line = json.dumps(event)
            emitter.emit(line)
            evidence.forwarded += 1
        self.events_file.unlink()
        return evidence


@dataclass
class AgentEvidence:
    """What the agent's events of one application gave: how many were forwarded (the application's
    own), and the ``columnLineage`` facet its actions reported for the asset's dataset, with the
    columns it wrote (its ``schema``)."""

    forwarded: int = 0
    column_lineage: dict[str, Any] | None = None
    columns: list[str] = field(default_factory=list)
