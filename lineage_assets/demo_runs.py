"""Where the demo's runs run and what each said: executed in this process (``InProcess``, under the
demo's claim of the streaming jobs) or launched through Dagster's services (``ThroughServices``), each
read back as Dagster's events (``RunEvents``)."""

from __future__ import annotations

import time
import urllib.parse
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import dagster as dg

from lineage_assets.assets.common import asset_key
from lineage_assets.datasets import DATASETS
from lineage_assets.definitions import build_definitions, materializable
from lineage_assets.instance import open_instance, prepare_dagster_home
from lineage_assets.processes import sigterm_kept
from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import Settings
from lineage_assets.streaming.exclusive import AlreadyRunning, demo_holder, exclusive_runs

STREAMING = tuple(d for d in DATASETS.values() if d.job.streaming)


@dataclass(frozen=True)
class RunEvents:
    """What one Dagster run of the pass said, as Dagster's events: of a run executed here, or of one
    launched through the services, read back from the instance."""

    run_id: str
    events: list[dg.DagsterEvent]

    @classmethod
    def in_instance(cls, instance: dg.DagsterInstance, run_id: str) -> RunEvents:
        return cls(run_id, [entry.dagster_event for entry in instance.all_logs(run_id) if entry.dagster_event])

    def of_type(self, kind: dg.DagsterEventType) -> list[dg.DagsterEvent]:
        return [event for event in self.events if event.event_type == kind]

    def metadata(self, dataset) -> dict:
        """The metadata of the run's last materialization of ``dataset`` (empty: none)."""
        materializations = [
            event.materialization
            for event in self.of_type(dg.DagsterEventType.ASSET_MATERIALIZATION)
            if event.asset_key == asset_key(dataset)
        ]
        return {key: value.value for key, value in materializations[-1].metadata.items()} if materializations else {}

    def raise_failures(self) -> None:
        """Why the run was refused before any step ran (its resources not set up: another run of its
        streaming jobs, named); else its step failures, except a failed blocking asset check: that
        asset did materialize, and its check holds back what depends on it (the run reports it; the
        pipeline goes on)."""
        for event in self.of_type(dg.DagsterEventType.RESOURCE_INIT_FAILURE):
            if (error := event.engine_event_data.error) is None:
                continue
            while error.cause is not None:  # Dagster's wrapper first, the resource's own error last
                error = error.cause
            refused = AlreadyRunning if error.cls_name == AlreadyRunning.__name__ else RuntimeError
            raise refused(error.message.strip().split(": ", 1)[-1])  # without the class's name before it
        failed_steps = self.of_type(dg.DagsterEventType.STEP_FAILURE)
        for event in failed_steps:
            error = event.step_failure_data.error
            if error is None or error.cls_name != "DagsterAssetCheckFailedError":
                raise RuntimeError(
                    f"step {event.step_key} failed: {error.to_string() if error else 'no error recorded'}"
                )
        if self.of_type(dg.DagsterEventType.RUN_FAILURE) and not failed_steps:
            # Failed outside its steps (a launched run refused by its executor): the engine said why.
            errors = [e.engine_event_data.error for e in self.of_type(dg.DagsterEventType.ENGINE_EVENT)]
            said = next((error for error in errors if error is not None), None)
            if said is not None and said.cls_name == AlreadyRunning.__name__:
                raise AlreadyRunning(said.message.strip().split(": ", 1)[-1])
            raise RuntimeError(
                f"run {self.run_id} failed before any step: {said.message if said else 'no error recorded'}"
            )

    def checks(self, definitions: dg.Definitions, selection: Sequence[dg.AssetKey] = ()) -> dict[str, bool | None]:
        """Each check the run evaluated, passed or not, by its name; where several assets have a check
        of that name, by its name and asset ("lineage_matches_catalog of lakehouse/orders"). A check of
        the ``selection``'s assets that the run did not evaluate (its asset failed a blocking check
        first) is None: skipped."""
        graph = definitions.resolve_asset_graph()
        names = Counter(key.name for key in graph.asset_check_keys)

        def name(key: dg.AssetCheckKey) -> str:
            return key.name if names[key.name] == 1 else f"{key.name} of {key.asset_key.to_user_string()}"

        planned = sorted((key for asset in selection for key in graph.get(asset).check_keys), key=name)
        evaluated = {
            name(c.asset_check_key): c.passed
            for c in (e.asset_check_evaluation_data for e in self.of_type(dg.DagsterEventType.ASSET_CHECK_EVALUATION))
        }
        return {**{name(key): None for key in planned}, **evaluated}


class InProcess:
    """The pass's runs executed in this process (``dg.materialize``), under the demo's claim of the
    streaming jobs (``demo_claim``)."""

    def __init__(self, environment: SettingsResource, instance: dg.DagsterInstance):
        self.settings, self.instance = environment.settings, instance
        definitions = build_definitions(environment)
        self.assets = [*materializable(definitions.assets), *materializable(definitions.asset_checks)]
        self.resources = definitions.resources

    def claim(self) -> AbstractContextManager[None]:
        return demo_claim(self.settings)

    def run(self, selection: list[dg.AssetKey], partition_key: str | None = None, run_config: dict | None = None):
        return run_in_process(self.assets, self.instance, selection, self.resources, partition_key, run_config)


# Dagster's console logger prints each failed step, and its run, at ERROR with the error's whole stack,
# an expected failed check's too: above ERROR it is quiet, the demo's own lines say what each run did
# (RunEvents.raise_failures raises an unexpected failure with its stack), and the instance keeps every event.
QUIET_CONSOLE = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def run_in_process(
    assets: Sequence,
    instance: dg.DagsterInstance,
    selection: Sequence[dg.AssetKey],
    resources: Mapping[str, object] | None = None,
    partition_key: str | None = None,
    run_config: dict | None = None,
) -> RunEvents:
    """A run of ``selection`` executed in this process (``dg.materialize``), Dagster's console quiet."""
    with sigterm_kept():
        result = dg.materialize(
            assets,
            instance=instance,
            selection=selection,
            resources=resources,
            partition_key=partition_key,
            run_config={**QUIET_CONSOLE, **(run_config or {})},
            raise_on_error=False,
        )
    return RunEvents(result.run_id, list(result.all_events))


class ThroughServices:
    """The pass's runs launched through Dagster's webserver (its GraphQL API, as the UI launches them),
    started by the daemon out of the run queue, and read back from the instance once they end. No
    claim: the run queue lets one run of each job's pool out at a time, and each launched run claims
    its streaming jobs itself."""

    POLL_S, SAY_EVERY_S = 1.0, 60.0

    def __init__(self, settings: Settings, instance: dg.DagsterInstance, log=print):
        from dagster_graphql import DagsterGraphQLClient

        self.instance, self.log = instance, log
        address = urllib.parse.urlsplit(settings.dagster_url)
        self.client = DagsterGraphQLClient(address.hostname or settings.host, port_number=address.port)

    def claim(self) -> AbstractContextManager[None]:
        return nullcontext()

    def launch(
        self, selection: list[dg.AssetKey], partition_key: str | None = None, run_config: dict | None = None
    ) -> str:
        """A run of ``selection`` submitted to the run queue; its id."""
        return self.client.submit_job_execution(
            "__ASSET_JOB",  # Dagster's job of any selection of assets, as the UI's Materialize launches
            run_config=run_config or {},
            tags={"dagster/partition": partition_key} if partition_key else None,
            asset_selection=selection,
        )

    def ended(self, run_id: str) -> RunEvents:
        """The run's events once it has ended, its status said every minute while it waits or runs."""
        said = time.monotonic()
        while not (run := self.instance.get_run_by_id(run_id)) or not run.is_finished:
            if time.monotonic() - said >= self.SAY_EVERY_S:
                self.log(f"  run {run_id}: {run.status.value if run else 'not recorded yet'}")
                said = time.monotonic()
            time.sleep(self.POLL_S)
        return RunEvents.in_instance(self.instance, run_id)

    def run(self, selection: list[dg.AssetKey], partition_key: str | None = None, run_config: dict | None = None):
        return self.ended(self.launch(selection, partition_key, run_config))


def dagster_instance(settings: Settings) -> dg.DagsterInstance:
    return open_instance(settings, prepare_dagster_home(settings))


def pipeline_runs(settings: Settings, instance: dg.DagsterInstance) -> InProcess | ThroughServices:
    """Where the demo's runs run: through Dagster's services when the settings deploy them, else here."""
    if settings.dagster == "services":
        return ThroughServices(settings, instance)
    return InProcess(SettingsResource.of(settings), instance)


def demo_claim(settings: Settings) -> AbstractContextManager[None]:
    """Every streaming job's lock, for the demo in this process: taken at once, all or none, before a
    pass does anything (a second demo started at the same instant stops there, naming this one); the
    catch-up runs the pass makes run under it."""
    return exclusive_runs(settings.state_dir, {d.job.name: d.key for d in STREAMING}, demo_holder())
