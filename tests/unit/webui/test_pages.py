"""The web UI's page builders as pure functions of plain operator data: no master, no HTTP."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

import pytest

from master.webui.handlers import WebUI, _AgentError, sandbox_subpath
from master.webui.html import esc, external_link, megabytes, path, resources_text
from master.webui.model import (
    active_and_completed,
    follow_chunk,
    maintenance_rows,
    resource_split,
    role_tree,
)
from master.webui.pages import (
    agent_page,
    framework_page,
    maintenance_page,
    offers_page,
    roles_page,
    summary_page,
    tasks_page,
)
from master.webui.sandbox import browse_page, log_page, task_page
from master.webui.testing import Tables

EVIL = "<script>alert(1)</script>"


def task(tid: str, state: str = "TASK_RUNNING", ts: float = 1.0, *, fid: str = "f1", agent: str = "a1",
         name: str = "", **kw: Any) -> dict[str, Any]:
    return {"id": tid, "name": name or f"job {tid}", "framework_id": fid, "slave_id": agent, "state": state,
            "role": "*", "resources": {"cpus": 1.0, "mem": 128.0}, "statuses": [{"state": state, "timestamp": ts}],
            **kw}


def agent(aid: str = "a1", **kw: Any) -> dict[str, Any]:
    base = {"id": aid, "hostname": "10.0.0.7", "port": 5051, "active": True, "deactivated": False,
            "phase": "REGISTERED", "resources": {"cpus": 4.0, "mem": 4096.0}, "used_resources": {"cpus": 1.0},
            "offered_resources": {"cpus": 2.0}, "attributes": {"rack": "r1"}, "reserved_resources": {}}
    return base | kw


def framework(fid: str = "f1", tasks: list[dict[str, Any]] | None = None,
              completed: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": fid, "name": "spark", "active": True, "roles": ["analytics"], "tasks": tasks or [],
            "completed_tasks": completed or [], "used_resources": {"cpus": 1.0}, "offered_resources": {"cpus": 2.0}}


class Scripts(HTMLParser):
    """The <script> elements of a page: their attributes and text."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.scripts: list[tuple[dict[str, str | None], str]] = []
        self._in = False
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.scripts.append((dict(attrs), ""))
            self._in = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in = False

    def handle_data(self, data: str) -> None:
        if self._in:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)


SNAPSHOT = {"master/cpus_total": 4.0, "master/cpus_used": 1.0, "master/mem_total": 4096.0,
            "master/mem_used": 128.0, "master/tasks_running": 1.0, "master/tasks_finished": 2.0,
            "master/tasks_failed": 0.0, "master/uptime_secs": 75.0}


def test_summary_labels_offered_and_allocated_apart_and_lists_tasks() -> None:
    state = {"id": "m1", "leader": "master@127.0.0.1:5050", "slaves": [agent()],
             "frameworks": [framework(tasks=[task("run")],
                                      completed=[task("old", "TASK_FINISHED", 1.0), task("new", "TASK_FINISHED", 9.0)])]}
    offers = [{"resources": {"cpus": 2.0, "mem": 1024.0}}]
    page = summary_page(state, SNAPSHOT, offers)
    split = {row[0]: row[1:] for row in Tables(page).with_header("resource")}
    assert split["cpus"] == ["4", "1", "2", "1"]  # total, allocated, offered, idle
    assert split["mem"] == ["4 GB", "128 MB", "1 GB", "2.88 GB"]
    assert "allocated (tasks)" in page and "offered (not in use)" in page
    assert dict(Tables(page).with_header("state")) == {"TASK_FINISHED": "2", "TASK_RUNNING": "1"}
    live, done = Tables(page).tables_with_header("task")
    assert [r[0] for r in live] == ["run"] and [r[0] for r in done] == ["new", "old"]  # newest first
    assert "Active tasks (1)" in page and "Completed tasks (2)" in page and "master@127.0.0.1:5050" in page
    capped = summary_page(state, SNAPSHOT, offers, limit=1)
    assert "the newest 1 of 2" in capped


def test_task_lists_link_to_the_task_and_straight_to_its_logs() -> None:
    page = tasks_page({"frameworks": [framework(tasks=[task("t 1")])]}, None)
    for href in ("/ui/tasks/f1/t%201", "/ui/tasks/f1/t%201/files/stdout", "/ui/tasks/f1/t%201/files/stderr",
                 "/ui/tasks/f1/t%201/files/download?path=stdout", "/ui/tasks/f1/t%201/files/download?path=stderr",
                 "/ui/tasks/f1/t%201/files"):
        assert f'href="{href}"' in page
    (row,) = Tables(page).with_header("task")
    assert row[0] == "t 1" and row[-1].split() == ["stdout", "stderr", "⤓stdout", "⤓stderr", "sandbox"]


def test_task_page_status_history_and_logs() -> None:
    t = task("t1", "TASK_FINISHED", 5.0, executor_id="")
    t["statuses"] = [{"state": "TASK_RUNNING", "timestamp": 1.0}, {"state": "TASK_FINISHED", "timestamp": 5.0}]
    page = task_page(t, agent())
    assert [r[0] for r in Tables(page).with_header("state")] == ["TASK_FINISHED", "TASK_RUNNING"]
    assert 'href="/ui/tasks/f1/t1/files/stdout"' in page and 'href="/ui/agents/a1"' in page
    assert 'href="/ui/tasks/f1/t1/files/download?path=stderr" download' in page
    assert "a1 (10.0.0.7)" in page
    assert "a1 (" not in task_page(t, None)  # the agent is gone: its id only
    assert "<dd>-</dd>" in page.split("usage")[1][:40]  # no figures yet
    t["usage"] = {"cpu_seconds": 2.5, "mem_rss_bytes": 0, "mem_peak_bytes": 8 * 1024 * 1024, "disk_used_bytes": 4096}
    assert "cpu 2.50 s, peak mem 8.0 MB, disk 0.0 MB" in task_page(t, agent())


def test_task_page_says_how_the_task_went() -> None:
    t = task("t1", "TASK_FAILED", 75.5, framework_name="spark")
    t["statuses"] = [
        {"state": "TASK_STARTING", "timestamp": 1.0},
        {"state": "TASK_RUNNING", "timestamp": 2.0},
        {"state": "TASK_FAILED", "timestamp": 75.5, "message": "Command exited with status 3",
         "reason": "REASON_COMMAND_EXECUTOR_FAILED", "labels": [{"key": "exit_code", "value": "3"}]},
    ]
    page = task_page(t, agent(), now=1000.0)
    facts = dict(Tables(page).facts())
    assert facts["exit code"] == "3" and facts["message"] == "Command exited with status 3"
    assert facts["duration"] == "1m 13s" and facts["ended"].endswith("UTC")
    assert facts["framework"] == "spark"  # the name; the id on hover
    assert 'title="f1"' in page
    rows = Tables(page).with_header("state")
    assert rows[0] == ["TASK_FAILED", "1970-01-01 00:01:15 UTC", "Command exited with status 3",
                       "REASON_COMMAND_EXECUTOR_FAILED"]
    assert rows[1][2:] == ["", ""]  # a status without a message: an empty message cell
    running = task("t2", "TASK_RUNNING", 2.0)
    running["statuses"] = [{"state": "TASK_RUNNING", "timestamp": 2.0}]
    facts = dict(Tables(task_page(running, agent(), now=12.5)).facts())
    assert facts["exit code"] == "-" and facts["duration"] == "10.5s so far" and facts["ended"] == "-"


def test_frameworks_show_by_name_with_the_id_on_hover() -> None:
    state = {"slaves": [agent()], "frameworks": [framework(tasks=[task("run")])]}
    for page in (summary_page(state, SNAPSHOT, []), tasks_page(state, None), agent_page(state, "a1") or ""):
        (row,) = [r for table in Tables(page).tables_with_header("task") for r in table]
        assert row[3] == "spark", row
        assert '<a href="/ui/frameworks/f1" title="f1" class="fw">spark</a>' in page
    offers = [{"id": "o1", "framework_id": "f1", "agent_id": "a1", "resources": {"cpus": 1.0}, "reusable": True}]
    page = offers_page(offers, {"f1": "spark"})
    (row,) = Tables(page).with_header("offer")
    assert row[1] == "spark" and row[7] == "lease"
    assert 'title="f1"' in page


def test_outstanding_offers_agree_with_the_offered_columns() -> None:
    state = {"slaves": [agent()], "frameworks": [framework()]}
    used_up = {"id": "o1", "framework_id": "f1", "resources": {"cpus": 0.0, "mem": 0.0}, "reusable": True}
    page = summary_page(state, SNAPSHOT, [used_up])
    facts = dict(Tables(page).facts())
    assert facts["outstanding offers"] == "0 with resources; 1 more reusable offer fully in use by their tasks"
    split = {row[0]: row[1:] for row in Tables(page).with_header("resource")}
    assert split["cpus"][2] == "0"  # offered
    both = summary_page(state, SNAPSHOT, [used_up, {"id": "o2", "resources": {"cpus": 1.0}}])
    assert dict(Tables(both).facts())["outstanding offers"].startswith("1 with resources; 1 more")
    assert dict(Tables(summary_page(state, SNAPSHOT, [{"resources": {"cpus": 1.0}}])).facts())[
        "outstanding offers"] == "1"


def test_the_version_is_agoras_with_the_mesos_api_apart() -> None:
    from protocol.version import AGORA_VERSION

    page = summary_page({"version": "1.11.0", "slaves": [], "frameworks": []}, SNAPSHOT, [])
    assert dict(Tables(page).facts())["version"] == f"Agora {AGORA_VERSION} (Mesos API 1.11.0)"


def test_long_ids_wrap_instead_of_widening_tables() -> None:
    from master.webui.html import STYLE

    assert "text-overflow:ellipsis" in STYLE and "minmax(0,1fr)" in STYLE


def test_pailer_page_carries_what_the_script_follows_from() -> None:
    page = log_page(task("t1"), agent(), "stdout", "line 1\n<b>x</b>\n", 0, 18, None, chunk=4096)
    assert re.search(r'<pre class="log" id="log" data-src="/ui/tasks/f1/t1/files/read\?path=stdout" '
                     r'data-offset="18" data-chunk="4096">\nline 1\n&lt;b&gt;x&lt;/b&gt;\n</pre>', page)
    assert 'id="follow" checked disabled' in page  # the script enables it
    assert 'href="/ui/tasks/f1/t1/files/download?path=stdout" download' in page
    cut = log_page(task("t1"), agent(), "stdout", "tail", 100, 104, None)
    assert "earlier output cut" in cut
    failed = log_page(task("t1"), None, "stdout", None, 0, 0, "The agent at x is unreachable")
    assert 'class="error"' in failed and 'id="log"' not in failed


def test_pages_load_nothing_from_the_network() -> None:
    page = log_page(task("t1"), agent(), "stdout", "x", 0, 1, None)
    (only,) = Scripts(page).scripts
    attrs, code = only
    assert attrs == {} and "fetch(log.dataset.src" in code and "'/api/v1'" in code
    assert not re.search(r"https?://|//[a-z]", code)
    assert "<link" not in page and " src=" not in page


@pytest.mark.parametrize("where", ["id", "name"])
def test_script_in_a_task_id_or_name_is_rendered_inert(where: str) -> None:
    t = task(EVIL) if where == "id" else task("t1", name=EVIL)
    if where == "id":
        t["framework_id"] = EVIL
    state = {"slaves": [agent()], "frameworks": [framework(EVIL if where == "id" else "f1", tasks=[t])]}
    pages = [
        tasks_page(state, None),
        summary_page(state, SNAPSHOT, []),
        agent_page(state, "a1"),
        framework_page(state, str(t["framework_id"])),
        task_page(t, agent()),
        log_page(t, agent(), "stdout", EVIL, 0, len(EVIL), None),
        browse_page(t, agent(), "", [{"path": f"{t['framework_id']}/{t['id']}/{EVIL}", "mode": "-rw-r--r--"}], None),
    ]
    for page in pages:
        assert page is not None
        assert EVIL not in page
        assert esc(EVIL) in page or "%3Cscript%3E" in page
        # the page's own script is the only one
        assert len(Scripts(page).scripts) == 1 and "alert(1)" not in Scripts(page).scripts[0][1]
    assert EVIL not in maintenance_page(state)


def test_role_tree_nests_and_adds_up_subtrees() -> None:
    roles = [
        {"name": "eng/ml/train", "weight": 2.0, "allocated": {"cpus": 2.0}, "offered": {"cpus": 1.0}},
        {"name": "eng", "weight": 1.0, "allocated": {"cpus": 1.0}, "offered": {}},
        {"name": "eng/web", "weight": 1.0, "allocated": {"mem": 64.0}, "offered": {}},
        {"name": "*", "weight": 1.0, "allocated": {}, "offered": {"cpus": 4.0}},
    ]
    star, eng = role_tree(roles)
    assert star.name == "*" and star.children == () and star.offered["cpus"] == 4.0
    assert [c.name for c in eng.children] == ["eng/ml", "eng/web"]
    ml = eng.children[0]
    assert ml.role is None and ml.label == "ml" and [c.label for c in ml.children] == ["train"]
    assert ml.allocated["cpus"] == 2.0
    assert eng.allocated["cpus"] == 3.0 and eng.allocated["mem"] == 64.0 and eng.offered["cpus"] == 1.0
    page = roles_page(roles)
    assert page.index('data-role="eng"') < page.index('data-role="eng/ml"') < page.index('data-role="eng/ml/train"')
    assert 'class="role-name implicit" title="eng/ml"' in page
    assert "(no role of its own)" in page


def test_maintenance_shows_out_of_service_agents_first_with_their_state() -> None:
    state = {
        "slaves": [
            agent("a1", unavailability={"start": {"nanoseconds": 1_900_000_000_000_000_000},
                                         "duration": {"nanoseconds": 3_600_000_000_000}}),
            agent("a2", phase="DRAINING", draining=True, drain_reason="kernel <upgrade>", drain_info={"state": "DRAINING", "config": {}}),
            agent("a3", active=False, deactivated=True, phase="UNREACHABLE"),
            agent("a4", active=False, deactivated=True, phase="UNREACHABLE", draining=True, drain_info={"state": "DRAINING", "config": {}}),
        ],
        "frameworks": [framework(tasks=[task("t1", agent="a2"), task("t2", agent="a2")],
                                 completed=[task("t3", "TASK_FINISHED", agent="a2")])],
    }
    rows = maintenance_rows(state)
    assert [(r.agent_id, r.state, r.out_of_service, r.action) for r in rows] == [
        ("a2", "draining", True, "REACTIVATE_AGENT"),
        ("a3", "deactivated (unreachable)", True, "DRAIN_AGENT"),
        ("a4", "draining (unreachable)", True, "REACTIVATE_AGENT"),
        ("a1", "in service", False, "DRAIN_AGENT"),
    ]
    assert rows[0].live_tasks == 2  # the completed one does not count
    assert [r.reason for r in rows] == ["kernel <upgrade>", "", "", ""]
    assert [r.window for r in rows] == ["", "", "", "from 2030-03-17 17:46:40 UTC for 3600 s"]
    page = maintenance_page(state)
    out, ok = Tables(page).tables_with_header("agent")
    assert [r[:3] for r in out] == [["a2", "10.0.0.7:5051", "draining"], ["a3", "10.0.0.7:5051",
                                    "deactivated (unreachable)"], ["a4", "10.0.0.7:5051", "draining (unreachable)"]]
    assert [r[-1] for r in ok] == ["drain"] and out[0][4] == "kernel <upgrade>"
    assert ok[0][5] == "from 2030-03-17 17:46:40 UTC for 3600 s" and out[0][5] == "-"
    assert 'name="reason"' in page
    assert ('<form class="operator-call" method="post" action="/api/v1" data-call="REACTIVATE_AGENT" '
            'data-agent="a2">') in page
    assert "every agent is in service" in maintenance_page({"slaves": [agent()]})


def test_agent_page_offers_the_maintenance_action() -> None:
    page = agent_page({"slaves": [agent(phase="DRAINING", draining=True, drain_reason="disk", drain_info={"state": "DRAINING", "config": {}})]}, "a1")
    assert page is not None and 'data-call="REACTIVATE_AGENT"' in page and "draining (DRAINING): disk" in page
    page = agent_page({"slaves": [agent()]}, "a1")
    assert page is not None and 'data-call="DRAIN_AGENT"' in page
    assert agent_page({"slaves": [agent()]}, "nope") is None


def test_active_and_completed_newest_first() -> None:
    state = {"frameworks": [framework(tasks=[task("a", ts=1.0), task("b", ts=3.0)],
                                      completed=[task("c", "TASK_FAILED", 2.0)])]}
    live, done = active_and_completed(state)
    assert [t["id"] for t in live] == ["b", "a"] and [t["id"] for t in done] == ["c"]


def test_pure_parts() -> None:
    assert resource_split({"cpus": 4, "mem": 100}, {"cpus": 1}, {"cpus": 2.5, "mem": 200}) == [
        ("cpus", 4.0, 1.0, 2.5, 0.5), ("mem", 100.0, 0.0, 200.0, 0.0),
        ("disk", 0.0, 0.0, 0.0, 0.0), ("gpus", 0.0, 0.0, 0.0, 0.0),
    ]
    assert [megabytes(v) for v in (512, 1536, 3 * 1024 * 1024)] == ["512 MB", "1.5 GB", "3 TB"]
    assert resources_text({"cpus": 0.5, "mem": 0, "ports": "[31000-31010]"}) == "cpus 0.5, ports [31000-31010]"
    assert path("ui", "agents", "a/b?c") == "/ui/agents/a%2Fb%3Fc"
    # a framework's web UI URL becomes a link only when it is http(s)
    assert external_link("https://fw.example/ui?a=1&b=2") == (
        '<a href="https://fw.example/ui?a=1&amp;b=2" rel="noopener noreferrer">https://fw.example/ui?a=1&amp;b=2</a>'
    )
    assert external_link("javascript:alert(1)") == "javascript:alert(1)"
    assert external_link('"><script>') == "&quot;&gt;&lt;script&gt;"
    assert path("ui", "tasks", query={"state": "TASK_RUNNING", "x": ""}) == "/ui/tasks?state=TASK_RUNNING"
    assert [sandbox_subpath(p) for p in ("", "stdout", "a//b/./c/", "../x", "a/../b", "/etc", "a\x00")] == [
        "", "stdout", "a/b/c", None, None, None, None,
    ]


def test_task_list_is_capped_newest_first() -> None:
    state = {"frameworks": [{"id": "f", "tasks": [task("old", ts=1.0, fid="f"), task("new", ts=3.0, fid="f")],
                             "completed_tasks": [task("mid", "TASK_FINISHED", 2.0, fid="f")]}]}
    page = tasks_page(state, None, limit=2)
    assert "Showing 2 of 3 tasks" in page
    assert [r[0] for r in Tables(page).with_header("task")] == ["mid", "new"]  # the newest two, by id
    page = tasks_page(state, "TASK_RUNNING", limit=2)
    assert "Showing" not in page and [r[0] for r in Tables(page).with_header("task")] == ["new", "old"]


def test_agent_address() -> None:
    t = {"slave_id": "a1"}
    assert WebUI._agent_url(t, {"id": "a1", "hostname": "10.0.0.7", "port": 5051}) == "http://10.0.0.7:5051"
    assert WebUI._agent_url(t, {"id": "a1", "hostname": "fd00::7", "port": 5051}) == "http://[fd00::7]:5051"
    for ag, says in (
        ({"id": "a1", "hostname": "0.0.0.0", "port": 5051}, "registered the wildcard address 0.0.0.0"),
        ({"id": "a1", "hostname": "h", "port": 0}, "did not register an address"),
        (None, "no longer known to the master"),
    ):
        with pytest.raises(_AgentError, match=says) as e:
            WebUI._agent_url(t, ag)
        assert e.value.status == 502


def test_follow_chunk_rereads_a_character_cut_at_the_end() -> None:
    assert follow_chunk("line 1\n", 10) == ("line 1\n", 17)
    whole = "é€\n".encode()
    cut = whole[:4]  # "é" and two of the three bytes of "€"
    data = cut.decode("utf-8", errors="replace")  # as the agent answers
    assert follow_chunk(data, 0) == ("é", 2)  # the cut "€" is asked for again from byte 2
    assert follow_chunk(whole[2:].decode(), 2) == ("€\n", len(whole))
    assert follow_chunk("", 5) == ("", 5)


def test_framework_page_says_why_it_gets_no_offers() -> None:
    why = "every agent is excluded: agent has GPUs and the framework lacks the GPU_RESOURCES capability"
    waiting = framework() | {"offers_reason": why}
    page = framework_page({"frameworks": [waiting]}, "f1")
    assert page is not None and "why no offers" in page and why in page
    plain = framework_page({"frameworks": [framework()]}, "f1")
    assert plain is not None and "why no offers" not in plain


def test_a_task_group_task_is_browsed_under_its_executor_sandbox() -> None:
    """The agent nests a DEFAULT-executor task's sandbox under the executor's: the UI asks for
    that path and lists the entries relative to it."""
    from master.webui.handlers import WebUI

    pod = task("t1", executor_id="pod")
    assert WebUI._agent_path(pod, "") == "f1/pod/tasks/t1"
    assert WebUI._agent_path(pod, "logs/x") == "f1/pod/tasks/t1/logs/x"
    assert WebUI._agent_path(task("t2", executor_id=""), "") == "f1/t2"
    page = browse_page(pod, agent(), "", [{"path": "f1/pod/tasks/t1/stdout", "mode": "-rw-r--r--"}], None)
    assert ">stdout<" in page and "pod/tasks" not in page
