"""Lineage as Marquez shows it: its HTTP API read into the same ``LineageGraph`` the event log gives.

The lineage check then compares Marquez's view with the asset graph exactly as it compares the event
log's, so a difference between what the project emits and what its users see in Marquez (a job
renamed under another parent, an invented parent, an extra writer, a lost transformation, a run
turned back to RUNNING) is a gap. Marquez's own Python client (marquez-python 0.50) does not fit: it
has no call for the lineage graph, reads events from a path Marquez 0.51 does not serve
(``/events`` for ``/events/lineage``) and imports pytz without declaring it. The seven GETs this
needs are read with the standard library.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from lineage_assets.catalog import DATASETS
from lineage_assets.lineage.graph import JobSummary, LineageGraph

# Marquez's run states as the OpenLineage event types that lead to them.
RUN_STATE_EVENTS = {"NEW": "START", "RUNNING": "START", "COMPLETED": "COMPLETE", "FAILED": "FAIL", "ABORTED": "ABORT"}
PAGE = 1000


class MarquezError(RuntimeError):
    """Marquez could not be read; the message names the URL."""


@dataclass(frozen=True)
class MarquezApi:
    url: str  # the API's base URL, e.g. http://127.0.0.1:15000
    timeout: float = 10.0

    def get(self, path: str, **params) -> dict:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        address = f"{self.url.rstrip('/')}/api/v1/{path}{query}"
        try:
            with urllib.request.urlopen(address, timeout=self.timeout) as response:
                return json.load(response)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                return {}
            raise MarquezError(f"Marquez answered {error.code} for {address}") from error
        except (urllib.error.URLError, OSError) as error:
            raise MarquezError(f"Marquez is not reachable at {address}: {error}") from error

    def jobs(self, namespace: str) -> list[dict]:
        return self.get(f"namespaces/{_quote(namespace)}/jobs", limit=PAGE).get("jobs", [])

    def runs(self, namespace: str, job: str) -> list[dict]:
        return self.get(f"namespaces/{_quote(namespace)}/jobs/{_quote(job)}/runs", limit=PAGE).get("runs", [])

    def datasets(self, namespace: str) -> list[dict]:
        return self.get(f"namespaces/{_quote(namespace)}/datasets", limit=PAGE).get("datasets", [])

    def run(self, run_id: str) -> dict:
        return self.get(f"jobs/runs/{_quote(run_id)}")

    def events(self, limit: int = PAGE) -> list[dict]:
        """The OpenLineage events Marquez stored, newest first."""
        return self.get("events/lineage", limit=limit).get("events", [])

    def lineage(self, namespace: str, name: str, depth: int = 20) -> dict:
        return self.get("lineage", nodeId=f"dataset:{namespace}:{name}", depth=depth)

    def column_lineage(self, namespace: str, name: str, field: str) -> dict:
        """The upstream column graph of one field (Marquez's nodes carry each hop's transformation)."""
        return self.get("column-lineage", nodeId=f"datasetField:{namespace}:{name}:{field}", depth=20, withDownstream="false")


def _quote(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def read_graph(api: MarquezApi, settings) -> LineageGraph:
    """Marquez's jobs in the project's namespace (with parents, inputs, outputs and runs) and the
    column lineage of every asset column that has some."""
    namespace, graph = settings.lineage_namespace, LineageGraph()
    for job in api.jobs(namespace):
        key = f"{namespace}/{job['name']}"
        summary = graph.jobs.setdefault(key, JobSummary(key))
        if job.get("parentJobName"):
            summary.parent = f"{namespace}/{job['parentJobName']}"
        for side, target in (("inputs", graph.inputs), ("outputs", graph.outputs)):
            for dataset in job.get(side) or []:
                target[key].add((dataset["namespace"], dataset["name"]))
        for run in api.runs(namespace, job["name"]):
            summary.runs.add(run["id"])
            graph.run_states[run["id"]].append((key, RUN_STATE_EVENTS.get(run["state"], run["state"])))
    for dataset in DATASETS.values():
        identity = dataset.identity(settings)
        for column in dataset.column_lineage:
            for node in api.column_lineage(identity.namespace, identity.name, column).get("graph", []):
                data = node.get("data") or {}
                for source in data.get("inputFields") or []:
                    edge = ((source["namespace"], source["dataset"]), source["field"], (data["namespace"], data["dataset"]), data["field"])
                    graph.column_edges.add(edge)
                    graph.column_transformations[edge] = source.get("transformationType")
    return graph


def lineage_nodes(api: MarquezApi, namespace: str, name: str) -> tuple[set[str], set[tuple[str, str]]]:
    """The jobs ("namespace/name") and datasets ((namespace, name)) of Marquez's lineage graph around a dataset."""
    jobs, datasets = set(), set()
    for node in api.lineage(namespace, name).get("graph", []):
        data = node.get("data") or {}
        if node["type"] == "JOB":
            jobs.add(f"{data['namespace']}/{data['name']}")
        elif node["type"] == "DATASET":
            datasets.add((data["namespace"], data["name"]))
    return jobs, datasets


def dataset_names(api: MarquezApi, namespaces: set[str]) -> set[tuple[str, str]]:
    """Every dataset Marquez holds in these namespaces."""
    return {(namespace, dataset["name"]) for namespace in namespaces for dataset in api.datasets(namespace)}
