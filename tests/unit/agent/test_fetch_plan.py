"""The fetcher's pure decisions: URI checks and resolution, the cache's book, the messages, and
what the task tracker does around a fetch (STARTING, spawn after it, failure, kill during it)."""

from __future__ import annotations

import pytest

from agent.fetch_plan import (
    CacheBook,
    FetchFailure,
    ItemResult,
    UriError,
    archive_kind,
    check_uri,
    parse_bytes,
    plan_item,
    progress,
    summary,
)
from agent.tasks import (
    CancelFetch,
    CheckpointTask,
    EmitStatus,
    Fetched,
    FetchFailed,
    FetchProgress,
    FetchTask,
    KillTask,
    LaunchTask,
    ReleaseTask,
    ShutdownFramework,
    Spawned,
    SpawnTask,
    TaskTracker,
)
from agent.taskspec import CommandSpec, SpecError, TaskSpec, task_spec
from protocol.mesos import URI, CommandInfo, TaskInfo
from protocol.mesos_common import TaskID
from protocol.resources import Resources
from protocol.task_states import TaskState as S

# --- URIs ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "why"),
    [
        (URI(""), "empty"),
        (URI("hdfs://nn/x.tgz"), "scheme 'hdfs' is not supported"),
        (URI("s3://bucket/x"), "scheme 's3' is not supported"),
        (URI("http:///x.tgz"), "has no host"),
        (URI("http://h/"), "give output_file"),
        (URI("http://h/x", output_file="/etc/passwd"), "relative to the sandbox"),
        (URI("http://h/x", output_file="a/../../x"), "inside the sandbox"),
        (URI("http://h/x", output_file=".."), "inside the sandbox"),
        (URI("http://h/%2e%2e"), "give output_file"),
        (URI("/tmp/x\x00y"), "NUL"),
    ],
)
def test_bad_uris_are_refused(uri: URI, why: str) -> None:
    with pytest.raises(UriError, match=why):
        check_uri(uri)


def test_bad_uri_makes_the_task_invalid() -> None:
    info = TaskInfo(name="t", task_id=TaskID("t"), command=CommandInfo(value="true", uris=(URI("hdfs://nn/x"),)),
                    resources=Resources.of(cpus=0.1).to_mesos())
    with pytest.raises(SpecError, match="hdfs"):
        task_spec("f", info)


def test_plan_http_with_extract_defaults() -> None:
    item = plan_item(URI("https://example.org/a/b/app.tar.gz?x=1"), None)
    assert (item.scheme, item.source, item.dest, item.extract, item.executable, item.cache) == (
        "https", "https://example.org/a/b/app.tar.gz?x=1", "app.tar.gz", "tar", False, False)
    assert plan_item(URI("http://h/data.gz"), None).extract == "gz"
    assert plan_item(URI("http://h/data.zip", extract=False), None).extract is None
    # executable wins over extract (as Mesos): the file is only made executable
    ex = plan_item(URI("http://h/tool.tgz", executable=True), None)
    assert ex.executable and ex.extract is None
    # output_file renames (and may go into a directory of the sandbox); its name decides the archive kind
    out = plan_item(URI("http://h/download?id=3", output_file="lib/x.zip", cache=True), None)
    assert (out.dest, out.extract, out.cache) == ("lib/x.zip", "zip", True)


def test_plan_local_paths() -> None:
    assert plan_item(URI("/srv/files/./a.txt"), None).source == "/srv/files/a.txt"
    f = plan_item(URI("file:///srv/my%20file.tgz"), None)
    assert (f.scheme, f.source, f.dest, f.extract) == ("file", "/srv/my file.tgz", "my file.tgz", "tar")
    assert plan_item(URI("bin/run.sh"), "/opt/fw").source == "/opt/fw/bin/run.sh"
    with pytest.raises(FetchFailure, match="framework home was not specified"):
        plan_item(URI("bin/run.sh"), None)


@pytest.mark.parametrize(
    ("name", "kind"),
    [("a.tar", "tar"), ("a.tgz", "tar"), ("a.tar.bz2", "tar"), ("a.tbz2", "tar"), ("a.tar.xz", "tar"),
     ("a.txz", "tar"), ("a.gz", "gz"), ("a.zip", "zip"), ("a.jar", None), ("tar", None)],
)
def test_archive_kinds(name: str, kind: str | None) -> None:
    assert archive_kind(name) == kind


# --- the cache's book ---------------------------------------------------------------------------


def test_cache_hits_admits_and_evicts_least_recently_used() -> None:
    book = CacheBook(100)
    assert not book.hit("a", 1.0)
    assert book.admit("a", 40, 1.0).ok
    book.release("a")
    assert book.admit("b", 40, 2.0).ok
    book.release("b")
    assert book.hit("a", 3.0)  # a is now the more recently used
    book.release("a")
    adm = book.admit("c", 40, 4.0)
    assert adm.ok and adm.evict == ("b",)
    assert set(book.entries) == {"a", "c"} and book.total() == 80


def test_cache_never_evicts_entries_in_use_and_refuses_what_cannot_fit() -> None:
    book = CacheBook(100)
    assert book.admit("a", 60, 1.0).ok  # in use until released
    adm = book.admit("b", 60, 2.0)
    assert not adm.ok and adm.evict == () and "in use" in (adm.why or "")
    big = book.admit("huge", 101, 3.0)
    assert not big.ok and "more than the fetcher cache holds" in (big.why or "")
    book.release("a")
    adm = book.admit("b", 60, 4.0)
    assert adm.ok and adm.evict == ("a",)
    book.drop("b")
    assert book.total() == 0


# --- words ---------------------------------------------------------------------------------------


def test_messages_and_sizes() -> None:
    rs = [ItemResult("u1", "a", 1024, False), ItemResult("u2", "b", 2048 * 1024, True)]
    assert summary(rs, 0.314) == "fetched 2 URIs: 2.0 MiB, 1 from the cache, in 0.31 s"
    assert summary(rs[:1], 1.0) == "fetched 1 URI: 1.0 KiB, in 1.00 s"
    assert progress(3, 1, 5 * 1024 * 1024, 12.4) == "Fetching 3 URIs: 1 done, 5.0 MiB received, 12 s"
    assert parse_bytes("2GB") == 2 << 30 and parse_bytes("512MB") == 512 << 20 and parse_bytes("1024") == 1024
    assert parse_bytes("1.5KiB") == 1536
    with pytest.raises(ValueError, match="not a size"):
        parse_bytes("lots")


# --- the tracker around a fetch -----------------------------------------------------------------------


def fetching_spec(tid: str = "t1") -> TaskSpec:
    return TaskSpec("f1", tid, tid, CommandSpec(argv=("/bin/true",), uris=(URI("http://h/a.tgz"), URI("http://h/b"))))


def test_launch_with_uris_fetches_first_then_spawns() -> None:
    tr = TaskTracker()
    sp = fetching_spec()
    eff = tr.handle(LaunchTask(sp), 0.0)
    assert eff == [CheckpointTask(sp), EmitStatus("f1", "t1", S.TASK_STARTING, message="Fetching 2 URIs into the sandbox"), FetchTask(sp)]
    assert tr.handle(FetchProgress("f1", "t1", "Fetching 2 URIs: 1 done"), 1.0) == [
        EmitStatus("f1", "t1", S.TASK_STARTING, message="Fetching 2 URIs: 1 done")]
    assert tr.handle(Fetched("f1", "t1", "fetched 2 URIs: 3 KiB, in 0.10 s"), 2.0) == [SpawnTask(sp)]
    assert tr.handle(FetchProgress("f1", "t1", "late"), 2.0) == []  # the fetch is over
    eff = tr.handle(Spawned("f1", "t1", 42), 2.1)
    assert eff == [EmitStatus("f1", "t1", S.TASK_RUNNING, message="pid 42 (fetched 2 URIs: 3 KiB, in 0.10 s)")]


def test_fetch_failure_fails_the_task() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(fetching_spec()), 0.0)
    eff = tr.handle(FetchFailed("f1", "t1", "Failed to fetch all URIs for container 't1': boom"), 1.0)
    assert eff == [
        EmitStatus("f1", "t1", S.TASK_FAILED, "SOURCE_AGENT", "REASON_CONTAINER_LAUNCH_FAILED",
                   "Failed to fetch all URIs for container 't1': boom"),
        ReleaseTask("f1", "t1"),
    ]
    assert tr.handle(Fetched("f1", "t1", "late"), 2.0) == []


def test_kill_while_fetching_cancels_and_ends_killed() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(fetching_spec()), 0.0)
    eff = tr.handle(KillTask("f1", "t1"), 1.0)
    assert eff == [
        CancelFetch("f1", "t1"),
        EmitStatus("f1", "t1", S.TASK_KILLED, "SOURCE_AGENT", "REASON_TASK_KILLED_DURING_LAUNCH", "Killed while fetching its URIs"),
        ReleaseTask("f1", "t1"),
    ]
    assert tr.handle(Fetched("f1", "t1", "late"), 2.0) == []  # never spawned
    # a framework shutdown during a fetch ends it the same way, with the shutdown's reason
    tr.handle(LaunchTask(fetching_spec("t2")), 3.0)
    eff = tr.handle(ShutdownFramework("f1"), 4.0)
    assert eff[0] == CancelFetch("f1", "t2")
    assert [(e.state, e.reason) for e in eff if isinstance(e, EmitStatus)] == [(S.TASK_KILLED, "REASON_FRAMEWORK_REMOVED")]


def test_kill_after_fetch_before_spawn_waits_for_the_process() -> None:
    tr = TaskTracker()
    tr.handle(LaunchTask(fetching_spec()), 0.0)
    tr.handle(Fetched("f1", "t1", "fetched"), 1.0)
    assert tr.handle(KillTask("f1", "t1", grace=0.0), 1.1) == []  # the spawn is in flight
    eff = tr.handle(Spawned("f1", "t1", 7), 1.2)
    assert [type(e).__name__ for e in eff] == ["EmitStatus", "SignalTask"]
