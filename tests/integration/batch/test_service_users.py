"""Users of the batch and elastic services: every API call authenticates against the master's
credential and ACL files (401 for a missing or wrong credential, nothing changed), a job is owned
by the principal that submitted it (a body claiming another user is refused), only its owner or an
operator (an ACL) may cancel it, kill its tasks or read its logs (403, the job untouched), tasks
run as the owner's mapped OS account, and a restart keeps the owners, the users' usage (decaying
on from where it was written) and the limits."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp
from click.testing import CliRunner, Result

from frameworks.batch.config import BatchConfig, UsersConfig
from frameworks.batch.fairshare import FairShareConfig, Usage
from frameworks.batch.limits import Limits, LimitSet
from frameworks.batch.service import BatchService
from frameworks.cli.main import cli
from frameworks.elastic.service import ElasticService
from protocol.authn import basic_header, bearer_header
from protocol.clock import FakeClock

NO_MASTER = "127.0.0.1:9"  # discard port: nothing listens; the driver keeps retrying quietly
ALICE, BOB, OPS = "alice-t0ken", "bob-t0ken", "ops-t0ken"


def auth_files(tmp_path: Path) -> tuple[Path, Path]:
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({
        "credentials": [{"principal": "alice", "secret": "alice-pw"}],
        "tokens": [
            {"principal": "alice", "token": ALICE, "kind": "operator"},
            {"principal": "bob", "token": BOB},
            {"principal": "ops", "token": OPS, "kind": "operator"},
            {"principal": "agora-batch", "token": "fw-t0ken", "kind": "framework"},
        ],
    }))
    acls = tmp_path / "acls.json"
    ops = {"principals": {"values": ["ops"]}, "users": {"type": "ANY"}}
    acls.write_text(json.dumps({"permissive": False, "manage_jobs": [ops], "view_job_logs": [ops]}))
    return creds, acls


def as_(token: str) -> dict[str, str]:
    return {"Authorization": bearer_header(token)}


JOB = {"argv": ["true"], "cpus": 0.5}


async def test_batch_authenticates_every_call_and_only_owners_or_operators_act(tmp_path: Path) -> None:
    creds, acls = auth_files(tmp_path)
    config = BatchConfig(users=UsersConfig(os_user={"alice": "alice-os"}, default_os_user="nobody"))
    svc = BatchService(NO_MASTER, tmp_path / "w", credentials=creds, acls=acls, config=config)
    async with svc, aiohttp.ClientSession() as http:
        api = f"{svc.url}/api/v1"
        assert (await http.get(f"{svc.url}/health")).status == 200  # open: probes need no credential
        for headers in ({}, as_("wrong"), {"Authorization": basic_header("alice", "nope")},
                        as_("fw-t0ken")):  # a framework's credential is not one for this API
            r = await http.post(f"{api}/jobs", json=JOB, headers=headers)
            assert r.status == 401 and "Bearer" in r.headers["WWW-Authenticate"]
            assert (await r.json())["error"].startswith("Unauthorized: ")
            assert (await http.get(f"{api}/jobs", headers=headers)).status == 401
        assert (await (await http.get(f"{api}/jobs", headers=as_(OPS))).json())["jobs"] == []  # nothing changed

        # a job belongs to whoever submitted it; claiming someone else is refused, no id spent
        r = await http.post(f"{api}/jobs", json={**JOB, "user": "bob"}, headers=as_(ALICE))
        assert r.status == 403 and "may not claim user 'bob'" in (await r.json())["error"]
        r = await http.post(f"{api}/jobs", json={**JOB, "count": 2, "user": "alice"}, headers=as_(ALICE))
        assert r.status == 201
        mine = (await r.json())["id"]
        r = await http.post(f"{api}/jobs", json=JOB, headers={"Authorization": basic_header("alice", "alice-pw")})
        assert r.status == 201  # HTTP Basic works too (a browser)
        bobs = (await (await http.post(f"{api}/jobs", json=JOB, headers=as_(BOB))).json())["id"]
        assert (await (await http.get(f"{api}/whoami", headers=as_(BOB))).json())["principal"] == "bob"

        summary = await (await http.get(f"{api}/jobs/{mine}?summary=1", headers=as_(BOB))).json()
        assert (summary["user"], summary["run_as"]) == ("alice", "alice-os")  # mapped
        bob_job = await (await http.get(f"{api}/jobs/{bobs}?summary=1", headers=as_(BOB))).json()
        assert (bob_job["user"], bob_job["run_as"]) == ("bob", "nobody")  # not mapped: the default
        only = await (await http.get(f"{api}/jobs?user=alice", headers=as_(BOB))).json()
        assert [j["id"] for j in only["jobs"]] == [mine, bobs - 1]

        # bob may not cancel, kill or read the logs of alice's job: 403, the job untouched
        r = await http.post(f"{api}/jobs/{mine}/cancel", headers=as_(BOB))
        assert r.status == 403
        assert (await r.json())["error"].startswith("Forbidden: bob may not cancel alice's job")
        assert (await http.post(f"{api}/jobs/{mine}/tasks/0/kill", headers=as_(BOB))).status == 403
        r = await http.get(f"{api}/jobs/{mine}/logs?task=0", headers=as_(BOB))
        assert r.status == 403 and "read the logs of alice's job" in (await r.json())["error"]
        after = await (await http.get(f"{api}/jobs/{mine}?summary=1", headers=as_(ALICE))).json()
        assert after["state"] == "PENDING" and after["tasks"] == {"PENDING": 2}
        # the owner may; an operator (the ACL) may cancel anybody's
        r = await http.post(f"{api}/jobs/{bobs}/cancel", headers=as_(OPS))
        assert r.status == 200 and (await r.json())["state"] == "CANCELLED"
        r = await http.post(f"{api}/jobs/{mine}/cancel", headers=as_(ALICE))
        assert r.status == 200 and (await r.json())["state"] == "CANCELLED"

    # a restart keeps the owners (and what their tasks run as)
    async with BatchService(NO_MASTER, tmp_path / "w", credentials=creds, acls=acls, config=config) as svc, \
            aiohttp.ClientSession() as http:
        jobs = (await (await http.get(f"{svc.url}/api/v1/jobs", headers=as_(OPS))).json())["jobs"]
        assert [(j["id"], j["user"], j["run_as"]) for j in jobs] == [
            (mine, "alice", "alice-os"), (mine + 1, "alice", "alice-os"), (bobs, "bob", "nobody")]


async def test_without_credentials_the_claimed_owner_is_recorded_and_never_maps(tmp_path: Path) -> None:
    """No --credentials: the API is open, a job records the user it claims (as Mesos'
    FrameworkInfo.user), and a claimed name never picks an OS account: the default is used."""
    config = BatchConfig(users=UsersConfig(os_user={"alice": "alice-os"}))
    async with BatchService(NO_MASTER, tmp_path, config=config) as svc, aiohttp.ClientSession() as http:
        r = await http.post(f"{svc.url}/api/v1/jobs", json={**JOB, "user": "alice"})
        job = await (await http.get(f"{svc.url}/api/v1/jobs/{(await r.json())['id']}?summary=1")).json()
        assert (job["user"], job["run_as"]) == ("alice", None)
        r = await http.post(f"{svc.url}/api/v1/jobs", json={**JOB, "user": 7})
        assert r.status == 400 and "user" in (await r.json())["error"]
        assert (await (await http.get(f"{svc.url}/api/v1/whoami")).json()) == {"principal": None, "authenticated": False}


async def test_elastic_authenticates_and_only_owners_or_operators_act(tmp_path: Path) -> None:
    creds, acls = auth_files(tmp_path)
    spec = {"name": "t", "worker": {"command": "true"}, "scaling": {"min_workers": 1, "max_workers": 2}}
    svc = ElasticService(NO_MASTER, tmp_path / "e", credentials=creds, acls=acls)
    async with svc, aiohttp.ClientSession() as http:
        api = f"{svc.url}/api/v1"
        r = await http.post(f"{api}/jobs", json=spec)
        assert r.status == 401 and "WWW-Authenticate" in r.headers
        assert (await (await http.get(f"{api}/jobs", headers=as_(OPS))).json())["jobs"] == []
        r = await http.post(f"{api}/jobs", json={**spec, "user": "bob"}, headers=as_(ALICE))
        assert r.status == 403
        r = await http.post(f"{api}/jobs", json=spec, headers=as_(ALICE))
        assert r.status == 201, await r.text()
        job = (await r.json())["id"]
        assert (await (await http.get(f"{api}/jobs/{job}", headers=as_(BOB))).json())["user"] == "alice"
        r = await http.post(f"{api}/jobs/{job}/cancel", headers=as_(BOB))
        assert r.status == 403 and "bob may not cancel alice's job" in (await r.json())["error"]
        assert (await http.post(f"{api}/jobs/{job}/scale", json={"max_workers": 3}, headers=as_(BOB))).status == 403
        assert (await http.get(f"{api}/jobs/{job}/logs", headers=as_(BOB))).status == 403
        assert (await (await http.get(f"{api}/jobs/{job}", headers=as_(ALICE))).json())["state"] != "CANCELLED"
        r = await http.post(f"{api}/jobs/{job}/cancel", headers=as_(OPS))
        assert r.status == 200


async def test_pages_metrics_priority_share_and_history_over_http(tmp_path: Path) -> None:
    """The jobs pages (401 without a credential), Prometheus metrics per queue and user, and the
    priority, share and history views as the CLI reads them."""
    creds, acls = auth_files(tmp_path)
    async with BatchService(NO_MASTER, tmp_path / "w", credentials=creds, acls=acls) as svc, \
            aiohttp.ClientSession() as http:
        assert (await http.get(f"{svc.url}/")).status == 401
        ids = []
        for token, name in ((ALICE, "<b>mine</b>"), (BOB, "bobs"), (BOB, "bobs")):
            r = await http.post(f"{svc.url}/api/v1/jobs", json={**JOB, "name": name, "count": 2}, headers=as_(token))
            ids.append((await r.json())["id"])
        page = await (await http.get(f"{svc.url}/", headers=as_(ALICE))).text()
        assert "&lt;b&gt;mine&lt;/b&gt;" in page and "<b>mine</b>" not in page  # a name is text
        assert "signed in as alice" in page
        job = await (await http.get(f"{svc.url}/ui/jobs/{ids[0]}", headers=as_(ALICE))).text()
        assert f'data-src="/api/v1/jobs/{ids[0]}/logs?task=0&amp;stream=stdout"' in job
        assert (await http.get(f"{svc.url}/ui/jobs/99", headers=as_(ALICE))).status == 404
        assert (await http.get(f"{svc.url}/ui/jobs/{ids[0]}?task=5", headers=as_(ALICE))).status == 400

        metrics = await (await http.get(f"{svc.url}/metrics", headers=as_(OPS))).text()
        assert 'agora_batch_pending_jobs{queue="*",user="alice"} 1.0' in metrics
        assert 'agora_batch_pending_jobs{queue="*",user="bob"} 2.0' in metrics
        assert 'agora_batch_pending_tasks{queue="*",user="bob"} 4.0' in metrics
        assert 'agora_batch_fairshare{queue="*",user="alice"} 1.0' in metrics
        assert "agora_batch_task_wait_seconds_bucket" in metrics or "agora_batch_task_wait_seconds" in metrics

        prio = await (await http.get(f"{svc.url}/api/v1/priority", headers=as_(BOB))).json()
        assert [j["id"] for j in prio["jobs"]] == ids  # no usage yet: age and id decide
        assert prio["weights"]["weight_fairshare"] == 10000.0
        share = await (await http.get(f"{svc.url}/api/v1/share", headers=as_(BOB))).json()
        assert [(u["user"], u["norm_shares"], u["fairshare"]) for u in share["users"]] == [
            ("alice", 0.5, 1.0), ("bob", 0.5, 1.0)]

        await http.post(f"{svc.url}/api/v1/jobs/{ids[1]}/cancel", headers=as_(BOB))
        hist = await (await http.get(f"{svc.url}/api/v1/history?user=bob&state=CANCELLED", headers=as_(ALICE))).json()
        assert [(j["id"], j["user"], j["state"], j["attempts"]) for j in hist["jobs"]] == [(ids[1], "bob", "CANCELLED", 0)]
        r = await http.get(f"{svc.url}/api/v1/history?state=DONE", headers=as_(ALICE))
        assert r.status == 400 and "state" in (await r.json())["error"]
        r = await http.get(f"{svc.url}/api/v1/history?since=yesterday", headers=as_(ALICE))
        assert r.status == 400 and "since" in (await r.json())["error"]
        assert (await (await http.get(f"{svc.url}/api/v1/accounting", headers=as_(ALICE))).json()) == {"attempts": []}


async def test_a_restart_keeps_owners_usage_and_limits_and_decay_goes_on(tmp_path: Path) -> None:
    """Stop and start the service on the same work dir (a test clock, the real SQLite store):
    alice's and bob's jobs keep their owners, the usage each user had decays on from where it was
    written (one half-life later it is half, bob's stays above alice's so her job still ranks
    first), and the limits apply to the restored jobs at once (alice's next job is refused)."""
    creds, acls = auth_files(tmp_path)
    config = BatchConfig(fairshare=FairShareConfig(half_life=3600.0),
                         limits=Limits(user={"*": LimitSet(max_pending_jobs=1)}))
    clock = FakeClock(start=10_000.0)

    def service() -> BatchService:
        return BatchService(NO_MASTER, tmp_path / "w", credentials=creds, acls=acls, config=config, now=clock.now)

    async with service() as svc, aiohttp.ClientSession() as http:
        svc.core.usage.restore(("*", "alice"), Usage(cpu=100.0, billing=100.0, at=clock.now()))
        svc.core.usage.restore(("*", "bob"), Usage(cpu=400.0, billing=400.0, at=clock.now()))
        ids = {}
        for token, who in ((ALICE, "alice"), (BOB, "bob")):
            r = await http.post(f"{svc.url}/api/v1/jobs", json=JOB, headers=as_(token))
            assert r.status == 201, await r.text()
            ids[who] = (await r.json())["id"]
        r = await http.post(f"{svc.url}/api/v1/jobs", json=JOB, headers=as_(ALICE))
        assert r.status == 429 and "user alice: 1 of 1 pending jobs" in (await r.json())["error"]
    # stopped: the usage was written at stop; an hour passes while the service is down
    clock.advance(3600.0)
    async with service() as svc, aiohttp.ClientSession() as http:
        jobs = (await (await http.get(f"{svc.url}/api/v1/jobs", headers=as_(OPS))).json())["jobs"]
        assert [(j["id"], j["user"], j["state"]) for j in jobs] == [
            (ids["alice"], "alice", "PENDING"), (ids["bob"], "bob", "PENDING")]
        share = (await (await http.get(f"{svc.url}/api/v1/share", headers=as_(BOB))).json())["users"]
        assert [(u["user"], round(u["cpu_seconds"], 6)) for u in share] == [("alice", 50.0), ("bob", 200.0)]
        prio = (await (await http.get(f"{svc.url}/api/v1/priority", headers=as_(BOB))).json())["jobs"]
        assert [j["id"] for j in prio] == [ids["alice"], ids["bob"]]  # less usage ranks first
        r = await http.post(f"{svc.url}/api/v1/jobs", json=JOB, headers=as_(ALICE))
        assert r.status == 429 and "user alice: 1 of 1 pending jobs" in (await r.json())["error"]
        r = await http.post(f"{svc.url}/api/v1/jobs", json=JOB, headers=as_(OPS))
        assert r.status == 201  # another user is under the limit


async def test_the_cli_signs_in_to_the_elastic_service_and_shows_the_owner(tmp_path: Path) -> None:
    """``agora elastic`` sends the token (or principal and secret) to the elastic service: alice
    submits and sees herself as USER; bob's cancel and scale of her job are refused with the
    service's reason (exit 1, the job untouched); no credential is a 401; alice cancels her own."""
    creds, acls = auth_files(tmp_path)
    async with ElasticService(NO_MASTER, tmp_path / "e", credentials=creds, acls=acls) as svc:

        def agora(*args: str, token: str = "") -> Result:
            env = {"AGORA_ELASTIC": svc.url, "AGORA_MASTER": NO_MASTER, "AGORA_TOKEN": token,
                   "AGORA_PRINCIPAL": "", "AGORA_SECRET": "", "AGORA_CONFIG": str(tmp_path / "none.toml")}
            return CliRunner().invoke(cli, ["elastic", *args], env=env)

        async def run(*args: str, token: str = "") -> Result:
            return await asyncio.to_thread(agora, *args, token=token)

        r = await run("submit", "--set", "name=t", "--set", "worker.command=true", "--min", "1", "--max", "2",
                      token=ALICE)
        assert r.exit_code == 0, r.output
        job = int(r.output.strip())
        r = await run("list", token=BOB)
        assert r.exit_code == 0, r.output
        header, row = r.output.splitlines()[:2]
        assert header.split()[:4] == ["ID", "NAME", "USER", "ST"] and row.split()[:4] == [str(job), "t", "alice", "PD"]
        r = await run("show", str(job), token=BOB)
        assert r.exit_code == 0 and "user=alice" in r.output, r.output

        r = await run("cancel", str(job), token=BOB)
        assert r.exit_code == 1 and "bob may not cancel alice's job" in r.output, r.output
        r = await run("scale", str(job), "--max", "3", token=BOB)
        assert r.exit_code == 1 and "bob may not scale alice's job" in r.output, r.output
        r = await run("list")
        assert r.exit_code == 1 and "requires authentication" in r.output, r.output
        assert (svc.core.job(job).state.value, svc.core.job(job).spec.scaling.max_workers) == ("PENDING", 2)

        # HTTP Basic: alice's principal and secret
        r = await asyncio.to_thread(CliRunner().invoke, cli, ["--principal", "alice", "--secret", "alice-pw",
                                                              "elastic", "--json", "list"],
                                    env={"AGORA_ELASTIC": svc.url, "AGORA_MASTER": NO_MASTER, "AGORA_TOKEN": "",
                                         "AGORA_CONFIG": str(tmp_path / "none.toml")})
        assert r.exit_code == 0 and [j["user"] for j in json.loads(r.output)["jobs"]] == ["alice"], r.output
        r = await run("cancel", str(job), token=ALICE)
        assert r.exit_code == 0 and "cancelled" in r.output, r.output


async def test_only_an_operator_raises_a_priority_anybody_lowers_one(tmp_path: Path) -> None:
    """Slurm's rule: alice may submit below the default priority and lower her job's, not raise
    it (403, nothing changed: in a preempting queue a priority decides whose tasks are evicted);
    the operator may raise it."""
    creds, acls = auth_files(tmp_path)
    async with BatchService(NO_MASTER, tmp_path / "w", credentials=creds, acls=acls) as svc, aiohttp.ClientSession() as http:
        api = f"{svc.url}/api/v1"
        r = await http.post(f"{api}/jobs", json={**JOB, "priority": 5}, headers=as_(ALICE))
        assert r.status == 403
        assert (await r.json())["error"] == (
            "Forbidden: priority: only an operator may raise a job's priority above 0 "
            "(manage_jobs denied for alice on 'alice' (no ACL matched))"
        )
        assert (await (await http.get(f"{api}/jobs", headers=as_(OPS))).json())["jobs"] == []  # no id spent
        r = await http.post(f"{api}/jobs", json={**JOB, "priority": -3}, headers=as_(ALICE))
        assert r.status == 201
        jid = (await r.json())["id"]
        r = await http.post(f"{api}/jobs/{jid}/update", json={"priority": 2}, headers=as_(ALICE))
        assert r.status == 403 and "above -3" in (await r.json())["error"]
        assert (await http.post(f"{api}/jobs/{jid}/update", json={"priority": -5}, headers=as_(ALICE))).status == 200
        r = await http.post(f"{api}/jobs/{jid}/update", json={"priority": 10}, headers=as_(OPS))
        assert r.status == 200 and (await r.json())["priority"] == 10
        detail = await (await http.get(f"{api}/jobs/{jid}", headers=as_(ALICE))).json()
        assert [(c["who"], c["what"]) for c in detail["changes"]] == [
            ("alice", "update priority -3 -> -5"), ("ops", "update priority -5 -> 10"),
        ]
        r = await http.post(f"{api}/jobs", json={**JOB, "priority": 7}, headers=as_(OPS))
        assert r.status == 201  # the operator's own job too
