"""What a Spark run's event log says about task skew, driver-bound results and JVM heap.

The runs write an uncompressed, non-rolling event log (spark_conf() below). From it:
* per stage, the records each task handled: the largest of its input records, shuffle records
  read, shuffle records written and output records (a task that lists or parses the whole store
  shows it in one of them); the stage is named by the job description the statekeeper jobs set
  per phase (statekeeper.jobs.progress), since SQL stage names are only call sites;
* the bytes of task results sent to the driver (collect, toPandas, toArrow, count ...);
* the peak JVM heap the executor metrics report (in local mode that is the driver's JVM).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


def spark_conf(directory: Path) -> dict[str, str]:
    return {"spark.eventLog.enabled": "true", "spark.eventLog.dir": directory.as_uri(),
            "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
            "spark.eventLog.logStageExecutorMetrics": "true",
            # heap sampled twice a second instead of at the 10 s heartbeat only
            "spark.executor.metrics.pollingInterval": "500ms"}


@dataclass
class StageStats:
    stage_id: int
    phase: str = ""
    tasks: int = 0
    records: int = 0          # sum over the stage's tasks
    max_task_records: int = 0
    result_bytes: int = 0


@dataclass
class EventLogStats:
    stages: dict[int, StageStats] = field(default_factory=dict)
    heap_peak: int = 0
    tasks: int = 0
    # Tasks still running when the application stopped: work Spark's adaptive execution stopped needing
    # (a join whose other side was empty) but did not kill (SPARK-37043); each held a core to the end.
    abandoned: list[str] = field(default_factory=list)

    @property
    def max_task(self) -> StageStats | None:
        return max(self.stages.values(), key=lambda s: s.max_task_records, default=None)

    @property
    def result_bytes(self) -> int:
        return sum(s.result_bytes for s in self.stages.values())


def _task_records(metrics: dict) -> int:
    return max(metrics.get("Input Metrics", {}).get("Records Read", 0),
               metrics.get("Shuffle Read Metrics", {}).get("Total Records Read", 0),
               metrics.get("Shuffle Write Metrics", {}).get("Shuffle Records Written", 0),
               metrics.get("Output Metrics", {}).get("Records Written", 0))


def _heap(metrics: dict | None) -> int:
    return int((metrics or {}).get("JVMHeapMemory", 0))


def parse(directory: Path) -> EventLogStats:
    """The statistics of the one application whose log is in `directory`."""
    out = EventLogStats()
    logs = [p for p in directory.iterdir() if p.is_file() and not p.name.endswith(".inprogress")]
    if not logs:
        return out
    phase_of_stage: dict[int, str] = {}
    running: dict[int, tuple[int, int]] = {}    # task id -> (stage id, launch time)
    ended = 0
    with open(logs[0], encoding="utf-8") as f:
        for line in f:
            event = json.loads(line)
            kind = event.get("Event")
            if kind == "SparkListenerJobStart":
                phase = (event.get("Properties") or {}).get("spark.job.description") or ""
                for sid in event.get("Stage IDs", ()):
                    phase_of_stage[sid] = phase
            elif kind == "SparkListenerTaskStart":
                info = event.get("Task Info") or {}
                running[info.get("Task ID")] = (event["Stage ID"], int(info.get("Launch Time", 0)))
            elif kind == "SparkListenerApplicationEnd":
                ended = int(event.get("Timestamp", 0))
            elif kind == "SparkListenerTaskEnd":
                running.pop((event.get("Task Info") or {}).get("Task ID"), None)
                sid = event["Stage ID"]
                stage = out.stages.get(sid)
                if stage is None:
                    stage = out.stages[sid] = StageStats(sid, phase_of_stage.get(sid, ""))
                metrics = event.get("Task Metrics") or {}
                n = _task_records(metrics)
                stage.tasks += 1
                stage.records += n
                stage.max_task_records = max(stage.max_task_records, n)
                stage.result_bytes += metrics.get("Result Size", 0)
                out.tasks += 1
                out.heap_peak = max(out.heap_peak, _heap(event.get("Task Executor Metrics")))
            elif kind == "SparkListenerStageExecutorMetrics":
                out.heap_peak = max(out.heap_peak, _heap(event.get("Executor Metrics")))
            elif kind == "SparkListenerExecutorMetricsUpdate":
                for update in event.get("Executor Metrics Updated", ()):
                    out.heap_peak = max(out.heap_peak, _heap(update.get("Executor Metrics")))
    out.abandoned = [f"stage {sid} ({phase_of_stage.get(sid, '') or 'no description'}), running "
                     f"{max(0, ended - launched) / 1000:.1f} s until the session stopped"
                     for sid, launched in sorted(running.values())]
    return out


def work_between(directory: Path, windows: list[tuple[float, float]]) -> list[tuple[int, int]]:
    """(Spark jobs submitted, stages completed) inside each (start, end) window, in epoch milliseconds, of
    the logs in `directory`: what each of several runs in one long-lived session asked of Spark, told
    apart by the driver's clock (that of the jobs' Submission Time), which the windows must use too."""
    counts = [[0, 0] for _ in windows]

    def add(at: int, slot: int) -> None:
        for i, (start, end) in enumerate(windows):
            if start <= at <= end:
                counts[i][slot] += 1
                return

    for log in sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.startswith(".")):
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:
                if '"Event":"SparkListenerJobStart"' in line:
                    add(json.loads(line).get("Submission Time", 0), 0)
                elif '"Event":"SparkListenerStageCompleted"' in line:
                    add((json.loads(line).get("Stage Info") or {}).get("Completion Time", 0), 1)
    return [(jobs, stages) for jobs, stages in counts]
