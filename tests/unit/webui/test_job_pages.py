"""The framework services' jobs pages as pure functions: names are text, never markup; the job
page lists every attempt with what it used and follows the chosen task's log; the elastic page
says why a job is not at its maximum."""

from __future__ import annotations

from frameworks.batch import pages as batch_pages
from frameworks.elastic import pages as elastic_pages
from master.webui.testing import Tables

DETAIL = {
    "id": 7, "name": "<script>x</script>", "user": "alice", "run_as": "alice-os", "state": "RUNNING",
    "queue": "*", "priority": 0, "count": 2, "tasks": {"RUNNING": 1, "PENDING": 1}, "reason": None,
    "submitted_at": 1.0, "started_at": 2.0, "ended_at": None, "gang": 0, "exit_code": None,
    "spec": {"argv": ["python", "train.py"]},
    "task_list": [
        {"index": 0, "phase": "RUNNING", "history": [
            {"attempt": 0, "task_id": "j7-0-0", "hostname": "h1", "started_at": 2.0, "ended_at": 5.0,
             "state": "TASK_FAILED", "exit_code": 1, "cpu_seconds": 1.25, "mem_peak_bytes": 3 << 20, "message": "oops"},
            {"attempt": 1, "task_id": "j7-0-1", "hostname": "h2", "started_at": 6.0}]},
        {"index": 1, "phase": "PENDING", "history": []},
    ],
}


def test_batch_jobs_page_escapes_names_and_links_each_job() -> None:
    html = batch_pages.jobs_page([DETAIL], [{"queue": "*", "user": "alice", "shares": 1, "norm_shares": 1.0,
                                             "usage": 12.5, "norm_usage": 1.0, "fairshare": 0.5}],
                                 master="http://m:5050", principal="alice")
    assert "<script>x" not in html and "&lt;script&gt;x&lt;/script&gt;" in html
    (row,) = Tables(html).with_header("ID")
    assert row == ["7", "<script>x</script>", "alice", "RUNNING", "*", "0", "pending:1 running:1", ""]
    assert Tables(html).with_header("QUEUE") == [["*", "alice", "1", "1", "12.5", "1", "0.5"]]
    assert 'href="/ui/jobs/7"' in html and 'href="http://m:5050"' in html


def test_batch_job_page_lists_every_attempt_and_follows_the_running_task() -> None:
    html = batch_pages.job_page(DETAIL, task=None, stream="stdout")
    rows = Tables(html).with_header("TASK")
    assert [r[:4] for r in rows] == [["0", "RUNNING", "0", "j7-0-0"], ["", "", "1", "j7-0-1"], ["1", "PENDING", "-", "-"]]
    assert rows[0][8:12] == ["TASK_FAILED", "1", "1.25", "3.0 MB"]
    assert 'data-src="/api/v1/jobs/7/logs?task=0&amp;stream=stdout"' in html
    assert "alice-os" in html
    other = batch_pages.job_page(DETAIL, task=1, stream="stderr")
    assert 'data-src="/api/v1/jobs/7/logs?task=1&amp;stream=stderr"' in other


def test_elastic_pages_show_figures_workers_and_why_not_at_max() -> None:
    summary = {"id": 3, "name": "digits", "user": "bob", "state": "RUNNING", "running": 1, "min_workers": 1,
               "max_workers": 3, "generation": 4, "samples_per_second": 812.34, "loss": 0.123456, "accuracy": 0.9,
               "reason": "at 1 of 3: waiting for offers", "role": "*"}
    (row,) = Tables(elastic_pages.jobs_page([summary])).with_header("ID")
    assert row == ["3", "digits", "bob", "RUNNING", "1 running (1..3)", "4", "812.3", "0.1235", "0.9",
                   "at 1 of 3: waiting for offers"]
    detail = {**summary, "worker_list": [{"index": 2, "task_id": "e3-w2", "hostname": "h", "phase": "RUNNING",
                                          "running_at": 1.0}], "ended_workers": [],
              "coordinator_status": {"log": ["generation 4: 1 worker"]}}
    html = elastic_pages.job_page(detail, worker=None, stream="stdout")
    assert Tables(html).tables_with_header("#")[0][0][:4] == ["2", "e3-w2", "h", "RUNNING"]
    assert 'data-src="/api/v1/jobs/3/logs?worker=2&amp;stream=stdout"' in html
    assert "at 1 of 3: waiting for offers" in html and "generation 4: 1 worker" in html
