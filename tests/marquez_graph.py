"""What the tests read of Marquez beyond what the package needs: its id of a job node, and every
dataset it holds in some namespaces."""

from __future__ import annotations

from lineage_assets.lineage.marquez import MarquezApi


def job_node(namespace: str, name: str) -> str:
    """Marquez's id of a job in its lineage graphs."""
    return f"job:{namespace}:{name}"


def dataset_names(api: MarquezApi, namespaces: set[str]) -> set[tuple[str, str]]:
    """Every dataset Marquez holds in these namespaces."""
    return {(namespace, dataset["name"]) for namespace in namespaces for dataset in api.datasets(namespace)}
