"""Memory: the resident memory of the stack's services and of the demo's Spark jobs while
`lineage-assets demo` runs on the stack, sampled from /proc every ``INTERVAL_S``.

What is measured:
- each service the Supervisor started, with its children (PostgreSQL's backends, Marquez web's
  node): the peak over the run of its processes' summed VmRSS, its main process's VmHWM (its peak
  since it started), and, for a JVM, its heap from HotSpot's shared counters (what jstat reads);
- each Spark job the demo's pipeline runs (named by its ``spark.app.name``; one entry however many
  days it ran for): its driver JVM (with a local master also the executor), and its Python side (the
  driver script and pyspark's workers, the JVM's children) summed; the largest run's figures;
- the demo's own process (Dagster in process, and whatever else it starts: spark-submit's launcher);
- the whole demo: the peak over time of the sum of every one of those processes' VmRSS, and which
  groups made it up at that moment.

VmRSS counts a page shared by several processes in each (PostgreSQL's shared buffers, the drivers'
class-sharing archive), so the sums are an upper bound of what the machine gave them. The demo runs as
a user runs it, in a process of its own on the stack's settings, so this process's own memory (and
what earlier benchmarks left in it) is not counted.
"""

from __future__ import annotations

import os
import pwd
import re
import struct
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from lineage_assets.resources.settings import SettingsResource
from lineage_assets.settings import PROJECT_ROOT
from lineage_assets.settings_environment import as_environment
from lineage_assets.stack.supervisor import Supervisor

TARGET_GIB = 8.0  # the stack plus the demo's jobs, on this 24 GiB machine
INTERVAL_S = 0.2
QUICK_ORDERS, FULL_ORDERS = 50, 500  # full: `lineage-assets demo`'s default
SPARK_DRIVER = "org.apache.spark.deploy.SparkSubmit"  # the class a driver JVM (spark-submit, pyspark's gateway) runs
SPARK_LAUNCHER = "org.apache.spark.launcher.Main"  # the short JVM that builds the driver's command line
# HotSpot keeps its counters in /tmp/hsperfdata_<user>/<pid> whatever java.io.tmpdir says.
PERF_DATA = Path("/tmp")
MAIN_ROLES = ("main", "jvm")  # a service's own process; a Spark job's driver JVM
PIPELINE_COMPLETED = "Rows written per asset"  # the demo prints its summary once every run of the pass ended
MIB = 1024  # KiB in a MiB


@dataclass(frozen=True)
class Group:
    """Whose a process is: a service, a Spark job's run (``run``: its driver's pid and start), or the demo."""

    kind: str  # "service", "spark" or "demo"
    name: str
    run: str = ""


@dataclass(frozen=True)
class Memory:
    """A process's resident memory now and its peak so far (KiB), and its owner's uid."""

    rss_kib: int
    hwm_kib: int
    uid: int


@dataclass
class Peaks:
    """The running maxima of one group's processes."""

    sum_kib: Counter[str] = field(default_factory=Counter)  # role ("all", "main", "jvm", "python", ...) -> peak
    hwm_kib: int = 0  # VmHWM of its main process
    heap_bytes: Counter[str] = field(default_factory=Counter)  # heap figure -> peak (a JVM's)
    xmx_mib: int | None = None  # its JVM's -Xmx
    processes: int = 0  # most processes at once

    def add_tick(self, now: Counter[str]) -> None:
        for role, kib in now.items():
            self.sum_kib[role] = max(self.sum_kib[role], kib)


def read_proc(pid: int | str, name: str) -> bytes:
    """A file of /proc/PID (plain open: pathlib's would double the sampler's cost, a few hundred reads a tick)."""
    with open(f"/proc/{pid}/{name}", "rb") as file:
        return file.read()


def process_table() -> dict[int, tuple[int, int]]:
    """Every live process: pid -> (parent's pid, start time in clock ticks since boot)."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                # The fields after the command's name (which may hold spaces): state, ppid, ...; starttime is field 22.
                fields = read_proc(entry.name, "stat").rsplit(b")", 1)[1].split()
            except OSError:
                continue
            table[int(entry.name)] = (int(fields[1]), int(fields[19]))
    return table


def arguments(pid: int) -> list[str]:
    """The process's command line (empty when it is gone, a zombie or a kernel thread)."""
    try:
        raw = read_proc(pid, "cmdline")
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.removesuffix(b"\0").split(b"\0")] if raw else []


def memory_of(pid: int) -> Memory | None:
    """The process's VmRSS and VmHWM; None when it is gone or has no memory of its own (a zombie)."""
    try:
        lines = read_proc(pid, "status").decode().splitlines()
    except OSError:
        return None
    values = dict(line.split(":", 1) for line in lines if ":" in line)
    if "VmRSS" not in values:
        return None
    return Memory(int(values["VmRSS"].split()[0]), int(values["VmHWM"].split()[0]), int(values["Uid"].split()[0]))


class PerfData:
    """JVMs' heap counters from their shared perf-data files, as jstat reads them, without starting a JVM
    on a busy machine. A file is a 32-byte prologue (magic, byte order, ..., the entries' offset and
    count at 24), then entries of (length, name offset, vector length, type, flags, units, variability,
    data offset). Where each counter lies is found once per file and entry count (a JVM adds counters
    as it starts); a tick then reads only the values."""

    def __init__(self) -> None:
        self._layouts: dict[tuple[Path, int], dict[str, int]] = {}

    def heap_counters(self, path: Path) -> dict[str, int]:
        data = path.read_bytes()
        order = "<" if data[4] == 1 else ">"
        entry, count = struct.unpack_from(order + "ii", data, 24)
        layout = self._layouts.get((path, count))
        if layout is None:
            layout = self._layouts[path, count] = self._layout(data, order, entry, count)
        return {name: struct.unpack_from(order + "q", data, at)[0] for name, at in layout.items()}

    @staticmethod
    def _layout(data: bytes, order: str, entry: int, count: int) -> dict[str, int]:
        """Where the value of each heap counter (a long) lies in the file."""
        layout = {}
        for _ in range(count):
            length, name_at, vector, kind, _, _, _, value_at = struct.unpack_from(order + "iiibbbbi", data, entry)
            name = data[entry + name_at : data.index(b"\0", entry + name_at)].decode()
            if kind == ord("J") and vector == 0 and HEAP_COUNTER.fullmatch(name):
                layout[name] = entry + value_at
            entry += length
        return layout


HEAP_COUNTER = re.compile(r"sun\.gc\.(generation\.\d\.(space\.\d+\.used|capacity)|metaspace\.used)")


SPACE_USED = re.compile(r"sun\.gc\.generation\.(\d)\.space\.\d+\.used")
GENERATION_CAPACITY = re.compile(r"sun\.gc\.generation\.\d\.capacity")


def heap_figures(counters: Mapping[str, int]) -> dict[str, int]:
    """Heap used (the young generation's spaces and the old one's), the old generation alone (what
    survived collections: the live set and garbage not collected yet), committed, and metaspace, in bytes."""
    used = old = 0
    for key, value in counters.items():
        if space := SPACE_USED.fullmatch(key):
            used += value
            old += value if space[1] == "1" else 0
    return {
        "used": used,
        "old_used": old,
        "committed": sum(value for key, value in counters.items() if GENERATION_CAPACITY.fullmatch(key)),
        "metaspace_used": counters.get("sun.gc.metaspace.used", 0),
    }


def max_heap_mib(command: list[str]) -> int | None:
    """The JVM's -Xmx in MiB (the last one counts, as for the JVM); None without one."""
    sizes = [re.fullmatch(r"-Xmx(\d+)([kKmMgG]?)", argument) for argument in command]
    found = [size for size in sizes if size]
    if not found:
        return None
    number, unit = int(found[-1][1]), found[-1][2].lower()
    return {"": number // 2**20, "k": number // 1024, "m": number, "g": number * 1024}[unit]


def is_spark_driver(command: list[str]) -> bool:
    """A driver JVM: not spark-class's shell nor Spark's launcher, which name the class before it runs."""
    return is_java(command) and SPARK_DRIVER in command and SPARK_LAUNCHER not in command


def is_java(command: list[str]) -> bool:
    return bool(command) and command[0].endswith("java")


def perf_file(pid: int, uid: int) -> Path:
    return PERF_DATA / f"hsperfdata_{pwd.getpwuid(uid).pw_name}" / str(pid)


def spark_application(command: list[str]) -> str:
    """A driver's spark.app.name, else its script's name."""
    for argument in command:
        if argument.startswith("spark.app.name="):
            return argument.split("=", 1)[1]
    return next((Path(argument).stem for argument in command if argument.endswith(".py")), "spark")


class MemorySampler:
    """Samples the processes below ``roots`` (a group's name -> its root pid) every ``interval_s`` in a
    thread, keeping each group's peaks and the peak of the total."""

    def __init__(self, roots: Mapping[str, int], interval_s: float = INTERVAL_S):
        self.roots = {Group("service", name): pid for name, pid in roots.items()}
        self.interval_s = interval_s
        self.groups: dict[Group, Peaks] = defaultdict(Peaks)
        self.peak_total_kib, self.peak_at_s, self.samples = 0, 0.0, 0
        self.first_total_kib: int | None = None
        self.peak_composition: dict[Group, int] = {}
        self.cpu_s = 0.0  # this sampler's own CPU time
        self.perf = PerfData()
        self._started = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="memory-sampler", daemon=True)

    def watch(self, group: Group, pid: int) -> None:
        # A new dict, assigned at once: the sampling thread reads the roots once per tick.
        self.roots = {**self.roots, group: pid}

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        while True:
            self.tick()
            if self._stop.wait(self.interval_s):
                break
        self.cpu_s = time.thread_time()

    def owners(self) -> dict[int, tuple[Group, str, list[str]]]:
        """Every process below a root: its group, its role in it and its command line. A Spark driver
        JVM and whatever it starts belong to that Spark run, below whichever root it runs."""
        table = process_table()
        children: dict[int, list[int]] = defaultdict(list)
        for pid, (parent, _) in table.items():
            children[parent].append(pid)
        pending: list[tuple[int, Group, str, list[str]]] = [
            (pid, group, "main", []) for group, pid in self.roots.items() if pid in table
        ]
        found = {}
        while pending:
            pid, group, role, parent_command = pending.pop()
            command = arguments(pid)
            if group.kind != "spark" and is_spark_driver(command):
                group, role = Group("spark", spark_application(command), f"{pid}.{table[pid][1]}"), "jvm"
            # A JVM's child not exec'd yet (a JVM starting a command shares its memory until it does): counted
            # in its parent. pyspark's daemon forks its workers for good: they count.
            if not (is_java(command) and command == parent_command):
                found[pid] = (group, role, command)
            below = "python" if group.kind == "spark" else "children"
            pending += [(child, group, below, command) for child in children[pid]]
        return found

    def tick(self) -> None:
        now: dict[Group, Counter[str]] = defaultdict(Counter)
        for pid, (group, role, command) in self.owners().items():
            memory = memory_of(pid)
            if memory is None:
                continue
            now[group].update({"all": memory.rss_kib, role: memory.rss_kib, "processes": 1})
            if role in MAIN_ROLES:
                self._main_process(self.groups[group], pid, memory, command)
        total = sum(counts["all"] for counts in now.values())
        for group, counts in now.items():
            self.groups[group].processes = max(self.groups[group].processes, counts.pop("processes"))
            self.groups[group].add_tick(counts)
        self.samples += 1
        if self.first_total_kib is None:
            self.first_total_kib = total
        if total > self.peak_total_kib:
            self.peak_total_kib, self.peak_at_s = total, time.monotonic() - self._started
            self.peak_composition = {group: counts["all"] for group, counts in now.items()}

    def _main_process(self, peaks: Peaks, pid: int, memory: Memory, command: list[str]) -> None:
        """A group's own process: its VmHWM, and a JVM's heap and -Xmx."""
        peaks.hwm_kib = max(peaks.hwm_kib, memory.hwm_kib)
        if not is_java(command):
            return
        peaks.xmx_mib = max_heap_mib(command)
        try:
            counters = self.perf.heap_counters(perf_file(pid, memory.uid))
        except (OSError, KeyError, struct.error, ValueError):  # not written yet, or the JVM exits
            return
        for figure, value in heap_figures(counters).items():
            peaks.heap_bytes[figure] = max(peaks.heap_bytes[figure], value)


def mib(kib: int) -> float:
    return round(kib / MIB, 1)


def heap_mib(peaks: Peaks) -> dict:
    if not peaks.heap_bytes:
        return {}
    return {
        "xmx_mib": peaks.xmx_mib,
        **{f"{figure}_peak_mib": round(value / 2**20, 1) for figure, value in peaks.heap_bytes.items()},
    }


def service_figures(peaks: Peaks) -> dict:
    return {
        "peak_rss_mib": mib(peaks.sum_kib["all"]),
        "main_process_hwm_mib": mib(peaks.hwm_kib),
        "most_processes": peaks.processes,
        **heap_mib(peaks),
    }


def spark_figures(runs: list[Peaks]) -> dict:
    """A job's figures over its runs: the largest of each."""
    largest = max(runs, key=lambda peaks: peaks.sum_kib["all"])
    return {
        "runs": len(runs),
        "peak_rss_mib": mib(largest.sum_kib["all"]),
        "driver_jvm_peak_mib": mib(max(peaks.hwm_kib for peaks in runs)),
        "python_peak_mib": mib(max(peaks.sum_kib["python"] for peaks in runs)),
        **heap_mib(largest),
    }


def label(group: Group) -> str:
    return {"service": group.name, "spark": f"spark {group.name}", "demo": "demo process"}[group.kind]


def run_demo(environment: SettingsResource, sampler: MemorySampler, orders: int) -> tuple[int, str]:
    """`lineage-assets demo` on the stack's settings, its processes sampled: its exit code and output."""
    command = [str(Path(sys.executable).with_name("lineage-assets")), "demo", "--orders", str(orders)]
    variables = {**os.environ, **as_environment(environment.settings)}
    with subprocess.Popen(
        command, cwd=PROJECT_ROOT, env=variables, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as demo:
        sampler.watch(Group("demo", "demo"), demo.pid)
        output, _ = demo.communicate()
    return demo.returncode, output


def live_heaps(services: Mapping[str, int]) -> dict[str, float]:
    """Each JVM service's heap (MiB) after a full collection (jcmd GC.run), once the demo has ended: its
    live set, what its -Xmx must hold."""
    perf, live = PerfData(), {}
    for name, pid in services.items():
        command, memory = arguments(pid), memory_of(pid)
        if memory is None or not is_java(command):
            continue
        subprocess.run(["jcmd", str(pid), "GC.run"], check=True, capture_output=True, timeout=120)
        live[name] = round(heap_figures(perf.heap_counters(perf_file(pid, memory.uid)))["used"] / 2**20, 1)
    return live


def run(environment: SettingsResource, quick: bool) -> dict:
    orders = QUICK_ORDERS if quick else FULL_ORDERS
    services = {status.name: status.pid for status in Supervisor(environment.settings).status() if status.pid}
    started = time.monotonic()
    with MemorySampler(services) as sampler:
        exit_code, output = run_demo(environment, sampler, orders)
    if PIPELINE_COMPLETED not in output:
        raise RuntimeError(f"the demo's pipeline did not complete (exit code {exit_code}):\n{output[-3000:]}")
    live = live_heaps(services)
    spark_runs: dict[str, list[Peaks]] = defaultdict(list)
    for group, peaks in sampler.groups.items():
        if group.kind == "spark":
            spark_runs[group.name].append(peaks)
    peak_gib = round(sampler.peak_total_kib / 2**20, 2)
    return {
        "name": "memory",
        "target": f"the stack and the demo's jobs <= {TARGET_GIB:g} GiB (peak of their summed RSS)",
        "met": peak_gib <= TARGET_GIB,
        "orders": orders,
        "demo_s": round(time.monotonic() - started, 1),
        # 1: a lineage check found gaps (the memory figures stand; the demo's own output says which).
        "demo_exit_code": exit_code,
        "interval_s": INTERVAL_S,
        "samples": sampler.samples,
        "sampler_cpu_s": round(sampler.cpu_s, 2),
        "stack_at_start_mib": mib(sampler.first_total_kib or 0),
        "peak_total_gib": peak_gib,
        "peak_at_s": round(sampler.peak_at_s, 1),
        "peak_composition_mib": {
            label(group): mib(kib) for group, kib in sorted(sampler.peak_composition.items(), key=lambda g: -g[1])
        },
        "services": {
            group.name: {
                **service_figures(peaks),
                **({"live_heap_mib": live[group.name]} if group.name in live else {}),
            }
            for group, peaks in sampler.groups.items()
            if group.kind == "service"
        },
        "spark_jobs": {name: spark_figures(runs) for name, runs in spark_runs.items()},
        "demo_process": service_figures(sampler.groups[Group("demo", "demo")]),
    }


def _heap(figures: dict) -> str:
    if "used_peak_mib" not in figures:
        return ""
    used, old = figures["used_peak_mib"], figures["old_used_peak_mib"]
    return f" (heap used {used:g}, old {old:g} of -Xmx {figures['xmx_mib']})"


def summary(result: dict) -> str:
    services = ", ".join(
        f"{name} {figures['peak_rss_mib']:g}{_heap(figures)}" for name, figures in result["services"].items()
    )
    jobs = ", ".join(
        f"{name} JVM {figures['driver_jvm_peak_mib']:g}"
        # The checks' session has no Python of its own: its driver is the demo's process.
        + (f" + Python {figures['python_peak_mib']:g}" if figures["python_peak_mib"] else "")
        + _heap(figures)
        for name, figures in result["spark_jobs"].items()
    )
    top = ", ".join(f"{name} {value:g}" for name, value in list(result["peak_composition_mib"].items())[:4])
    return (
        f"**peak {result['peak_total_gib']} GiB** of every process's RSS summed ({result['orders']} orders; stack at "
        f"start {result['stack_at_start_mib']:g} MiB; at the peak: {top}, …); services' peak RSS (MiB): {services}; "
        f"Spark jobs' peak (MiB): {jobs}; the demo's own process {result['demo_process']['peak_rss_mib']:g}"
    )
