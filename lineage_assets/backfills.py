"""Backfills launched through the Dagster webserver's GraphQL API, as its UI launches them, so they
show in the UI and run under its daemon. Dagster's Python client (``DagsterGraphQLClient``) has no
call for an asset backfill, so the mutation goes through ``gql``, the GraphQL client it is built on.
"""

from __future__ import annotations

LAUNCH = """
mutation LaunchPartitionBackfill($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
  }
}
"""


class BackfillError(RuntimeError):
    """The webserver refused a backfill or could not be reached; the message says which and why."""


def launch_backfills(dagster_url: str, partitions: dict[str, list[str]], title: str) -> dict[str, str]:
    """One backfill per asset (``"a/b"`` key) of exactly its ``partitions``; asset key -> backfill id."""
    # Imported here: the command line loads this module for its error class on every command.
    from gql import Client, GraphQLRequest
    from gql.transport.requests import RequestsHTTPTransport

    client = Client(transport=RequestsHTTPTransport(url=f"{dagster_url.rstrip('/')}/graphql", timeout=30))
    launched = {}
    for key, names in partitions.items():
        params = {"assetSelection": [{"path": key.split("/")}], "partitionNames": names, "title": title}
        try:
            answer = client.execute(GraphQLRequest(LAUNCH, variable_values={"params": params}))
        except Exception as error:  # gql raises the transport's errors as they are
            raise BackfillError(f"Dagster at {dagster_url} did not launch a backfill of {key}: {error}") from error
        result = answer["launchPartitionBackfill"]
        if result["__typename"] != "LaunchBackfillSuccess":
            raise BackfillError(f"Dagster at {dagster_url} refused a backfill of {key}: {result.get('message')}")
        launched[key] = result["backfillId"]
    return launched
