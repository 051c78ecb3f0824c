"""The chains/validation benchmark tells apart the runs of one long-lived session by the driver's clock:
each run's Spark jobs and stages are those its window holds (bench._eventlog.work_between), and a figure's
jobs are those of its median run (bench.chains_validate.Figures)."""
from __future__ import annotations

import json

from bench._eventlog import work_between
from bench.chains_validate import Figures


def _events(path, lines):
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))


def test_jobs_and_stages_are_counted_in_the_window_that_holds_them(tmp_path):
    logs = tmp_path / "events"
    logs.mkdir()
    _events(logs / "local-1", [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 900},
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": 950, "Stage Infos": []},   # warm-up
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Submission Time": 1_000, "Stage Infos": []},
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 1, "Completion Time": 1_200}},
        {"Event": "SparkListenerJobStart", "Job ID": 2, "Submission Time": 1_500, "Stage Infos": []},
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 2, "Completion Time": 1_600}},
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 3, "Completion Time": 1_700}},
        {"Event": "SparkListenerJobStart", "Job ID": 3, "Submission Time": 3_000, "Stage Infos": []},
        {"Event": "SparkListenerStageCompleted", "Stage Info": {"Stage ID": 4, "Completion Time": 3_100}},
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 4_000},
    ])
    assert work_between(logs, [(1_000, 1_800), (2_900, 3_200), (3_500, 3_900)]) == [(2, 3), (1, 1), (0, 0)]


def test_a_figure_reports_the_spark_work_of_its_median_run():
    fig = Figures(seconds=[9.0, 7.0, 8.0], work=[(30, 31), (23, 23), (24, 25)])
    assert fig.median() == 8.0
    assert fig.spark() == (24, 25)
    assert Figures(seconds=[1.0]).spark() == (0, 0)
