"""Fair share between users within a queue and per-user limits, through the pure core and planner
with exact outcomes: who gets the slots a wave frees, in which order jobs are served, and the
reason every job over a limit gives. Time is an argument (no clock, no sleep)."""

from __future__ import annotations

from collections import Counter

import attrs
import pytest

from frameworks.batch.config import BatchConfig, UsersConfig
from frameworks.batch.core import BatchCore, Launch
from frameworks.batch.fairshare import FairShareConfig, Rate, Usage, UsageBook
from frameworks.batch.limits import Limits, LimitSet, OnLimit
from frameworks.batch.model import JobSpec, spec_from_dict
from frameworks.batch.planner import OfferView
from protocol.resources import Resources
from protocol.task_states import TaskState

S = TaskState


def spec(**kw: object) -> JobSpec:
    return spec_from_dict({"argv": ["true"], "cpus": 1, "mem": 64, **kw})


class Cluster:
    """Agents whose free resources are offered whole (reusable offers): what a launch takes is gone
    from the offer, what a finished task held comes back."""

    def __init__(self, core: BatchCore, agents: int, cpus: float, gpus: float = 0.0) -> None:
        self.core = core
        self.free = {f"a{i}": Resources.of(cpus=cpus, mem=64 * 1024, gpus=gpus) for i in range(agents)}
        self.running: dict[str, tuple[str, Resources, str]] = {}  # task id -> (agent, resources, user)
        self.reasons: dict[int, str | None] = {}  # each live job's reason right after the round

    def offers(self) -> list[OfferView]:
        return [OfferView(f"o-{a}", a, a, "*", r) for a, r in sorted(self.free.items()) if r]

    def round(self, now: float) -> list[str]:
        """One scheduling round; the launched tasks run at once. The owners of what was placed."""
        placed = []
        launches = [e for e in self.core.schedule(self.offers(), now) if isinstance(e, Launch)]
        self.reasons = {j.job_id: j.reason for j in self.core.live.values()}
        for e in launches:
            for t in e.tasks:
                self.free[e.agent_id] = self.free[e.agent_id] - t.resources
                user = self.core.jobs[t.job_id].user or ""
                self.running[t.task_id] = (e.agent_id, t.resources, user)
                self.core.on_update(t.task_id, S.TASK_RUNNING, now)
                placed.append(user)
        return placed

    def finish_all(self, now: float) -> None:
        for task_id, (agent, res, _) in sorted(self.running.items()):
            self.core.on_update(task_id, S.TASK_FINISHED, now)
            self.free[agent] = self.free[agent] + res
        self.running.clear()


def waves(cluster: Cluster, start: float, every: float, count: int) -> list[Counter[str]]:
    """``count`` waves: all running tasks finish ``every`` seconds after they started, then a round."""
    out = []
    now = start
    for _ in range(count):
        now += every
        cluster.finish_all(now)
        out.append(Counter(cluster.round(now)))
    return out


@pytest.mark.parametrize("arrays", [True, False], ids=["two-arrays", "forty-jobs"])
def test_bob_gets_the_slots_alices_first_wave_frees(arrays: bool) -> None:
    """alice submits 20 one-cpu tasks, then bob 20, on an 8-cpu cluster: alice's first wave takes
    all 8; every slot it frees goes to bob (his usage is nothing, hers 80 cpu-seconds); then the
    two alternate as their usage evens out, and the last wave is shared."""
    core = BatchCore()
    cluster = Cluster(core, agents=2, cpus=4)

    def submit(user: str, now: float) -> None:
        if arrays:
            core.submit(spec(count=20), now, user=user)
        else:
            for _ in range(20):
                core.submit(spec(), now, user=user)

    submit("alice", 0.0)
    assert Counter(cluster.round(0.0)) == {"alice": 8}
    submit("bob", 1.0)
    assert cluster.round(1.0) == []  # nothing free
    got = waves(cluster, start=0.0, every=10.0, count=4)
    assert got[0] == {"bob": 8}  # at least half of the freed slots: all of them
    assert got == [{"bob": 8}, {"alice": 8}, {"bob": 8}, {"alice": 4, "bob": 4}]
    cluster.finish_all(50.0)
    assert not core.live and {j.state.value for j in core.jobs.values()} == {"SUCCEEDED"}


def test_usage_orders_users_above_job_priority_and_priority_orders_one_users_jobs() -> None:
    """The owner's fair share weighs 10000, the job's priority 1000: alice's priority-100 job waits
    behind bob's priority-0 job while alice has used the queue and bob has not; between alice's
    own jobs the higher priority goes first."""
    core = BatchCore()
    core.usage.restore(("*", "alice"), Usage(cpu=100, billing=100, at=0.0))
    low = core.submit(spec(priority=0), 0.0, user="alice")[0]
    high = core.submit(spec(priority=100), 1.0, user="alice")[0]
    bobs = core.submit(spec(priority=0), 2.0, user="bob")[0]
    f = core.priorities(2.0)
    assert [j for j, _ in sorted(f.items(), key=lambda kv: -kv[1].total)] == [bobs, high, low]
    assert (f[bobs].fairshare, f[high].fairshare) == (1.0, 0.25)  # 2^(-0/0.5), 2^(-1/0.5)
    assert (f[high].priority, f[low].priority, f[bobs].priority) == (1.0, 0.0, 0.0)
    assert f[bobs].total == pytest.approx(10000.0, abs=0.01)
    assert f[high].total == pytest.approx(2500.0 + 1000.0, abs=0.01)
    # the round serves them in that order: one slot, bob's job takes it
    cluster = Cluster(core, agents=1, cpus=1)
    placed = cluster.round(2.0)
    assert placed == ["bob"]
    assert core.jobs[high].reason == "waiting for 1 cpus; largest free offer has 0"


def test_shares_weigh_the_factor_and_usage_decays_with_its_half_life() -> None:
    """Equal usage, alice with 3 shares and bob with 1: alice's factor is higher (2^(-0.5/0.75)
    against 2^(-0.5/0.25)). One half-life later the usage is half, the factors the same (both
    decayed alike)."""
    cfg = BatchConfig(users=UsersConfig(shares={"alice": 3}), fairshare=FairShareConfig(half_life=100.0))
    core = BatchCore(config=cfg)
    for user in ("alice", "bob"):
        core.usage.restore(("*", user), Usage(cpu=50, billing=50, at=0.0))
        core.submit(spec(), 0.0, user=user)
    shares = core.shares(0.0)
    assert shares[("*", "alice")].factor == pytest.approx(2 ** (-0.5 / 0.75))
    assert shares[("*", "bob")].factor == pytest.approx(2 ** (-0.5 / 0.25))
    later = core.shares(100.0)
    assert later[("*", "alice")].usage.cpu == pytest.approx(25.0)
    assert later[("*", "alice")].factor == pytest.approx(shares[("*", "alice")].factor)


def test_charging_is_exact_whatever_the_rounds_spacing() -> None:
    """A rate held for 200 s charges the same in one step or in many; with a half-life of 100 s
    that is r*h/ln2*(1 - 2^-2) and the old usage has a quarter of its weight left."""
    cfg = FairShareConfig(half_life=100.0)
    one = UsageBook(cfg)
    many = UsageBook(cfg)
    for book in (one, many):
        book.restore(("*", "a"), Usage(cpu=40.0, billing=40.0, at=0.0))
        book.start(("*", "a"), Rate(cpus=2.0))
    one.advance(200.0)
    for t in range(1, 201):
        many.advance(float(t))
    import math

    expected = 40.0 / 4 + 2.0 * 100.0 / math.log(2) * (1 - 0.25)
    assert one.usage[("*", "a")].cpu == pytest.approx(expected)
    assert many.usage[("*", "a")].cpu == pytest.approx(expected)
    many.stop(("*", "a"), Rate(cpus=2.0))
    many.advance(300.0)
    assert many.usage[("*", "a")].cpu == pytest.approx(expected / 2)


# --- limits -------------------------------------------------------------------------------------


def limited(**scopes: object) -> BatchCore:
    return BatchCore(config=BatchConfig(limits=Limits(**scopes)))  # type: ignore[arg-type]


def test_a_user_over_a_gpu_limit_waits_with_the_exact_reason_and_others_run() -> None:
    core = limited(user={"*": LimitSet(max_gpus=8)})
    cluster = Cluster(core, agents=2, cpus=16, gpus=8)
    first = core.submit(spec(gpus=1, count=10), 0.0, user="alice")[0]
    second = core.submit(spec(gpus=1), 1.0, user="alice")[0]
    bobs = core.submit(spec(gpus=1, count=4), 2.0, user="bob")[0]
    assert Counter(cluster.round(3.0)) == {"alice": 8, "bob": 4}
    assert cluster.reasons[first] == "8 of 10 pending tasks placed; user alice: 8 of 8 gpus in use"
    assert cluster.reasons[second] == "user alice: 8 of 8 gpus in use"
    assert cluster.reasons[bobs] is None
    cluster.finish_all(10.0)
    assert Counter(cluster.round(10.0)) == {"alice": 3}  # the rest of alice's work, under her limit


def test_running_jobs_queue_and_queue_user_limits_name_themselves() -> None:
    core = limited(
        user={"*": LimitSet(max_running_jobs=2), "carol": LimitSet(max_running_jobs=5)},
        queue={"*": LimitSet(max_cpus=6)},
        queue_user={"*": LimitSet(max_mem=256)},
    )
    cluster = Cluster(core, agents=1, cpus=16)
    a = [core.submit(spec(), float(i), user="alice")[0] for i in range(3)]
    big = core.submit(spec(mem=200, count=2), 3.0, user="carol")[0]
    many = core.submit(spec(count=8, mem=8), 4.0, user="carol")[0]
    assert Counter(cluster.round(5.0)) == {"alice": 2, "carol": 4}
    assert cluster.reasons[a[2]] == "user alice: 2 of 2 running jobs"
    assert cluster.reasons[big] == "1 of 2 pending tasks placed; user carol in queue *: 200 of 256 MB of mem in use, a task needs 200"
    assert cluster.reasons[many] == "3 of 8 pending tasks placed; queue *: 6 of 6 cpus in use"


def test_a_gang_over_a_limit_holds_nothing_and_says_what_it_needs() -> None:
    core = limited(user={"*": LimitSet(max_gpus=8)})
    cluster = Cluster(core, agents=1, cpus=16, gpus=16)
    core.submit(spec(gpus=1, count=6), 0.0, user="alice")
    gang = core.submit(spec(gpus=1, count=4, gang=4), 1.0, user="alice")[0]
    after = core.submit(spec(gpus=1, count=2), 2.0, user="bob")[0]
    assert Counter(cluster.round(3.0)) == {"alice": 6, "bob": 2}  # the gang holds nothing: bob runs
    assert cluster.reasons[gang] == "gang 0/4 placed; user alice: 6 of 8 gpus in use, the gang needs 4"
    assert cluster.reasons[after] is None


def test_submissions_refused_by_the_limits() -> None:
    core = limited(user={"*": LimitSet(max_gpus=8, max_pending_jobs=2)}, queue_user={"*": LimitSet(max_cpus=4)})
    assert core.admission(spec(gpus=16), "alice") == "user alice: a task needs 16 gpus, the limit is 8"
    assert core.admission(spec(gpus=2, count=8, gang=8), "alice") == (
        "user alice: the gang needs 16 gpus at once, the limit is 8")
    assert core.admission(spec(cpus=5), "alice") == "user alice in queue *: a task needs 5 cpus, the limit is 4"
    for i in range(2):
        assert core.admission(spec(), "alice") is None
        core.submit(spec(), float(i), user="alice")
    assert core.admission(spec(), "alice") == "user alice: 2 of 2 pending jobs"
    assert core.admission(spec(), "bob") is None
    refusing = attrs.evolve(core.config.limits, on_limit=OnLimit.REFUSE, user={"*": LimitSet(max_gpus=2)})
    core.config = attrs.evolve(core.config, limits=refusing)
    cluster = Cluster(core, agents=1, cpus=16, gpus=4)
    core.submit(spec(gpus=2), 3.0, user="bob")
    cluster.round(4.0)
    assert core.admission(spec(gpus=1), "bob") == "user bob: 2 of 2 gpus in use"
    assert core.admission(spec(gpus=1), "alice") is None


def test_fair_order_after_updates_fair_share_first_then_the_updated_priorities() -> None:
    """alice has used the queue, bob not. Updates of priority reorder each user's own jobs but
    do not lift alice's above bob's (fair share weighs 10000, priority 1000); the round and the
    expected starts (``job list --start``) follow the same order."""
    core = BatchCore()
    core.usage.restore(("*", "alice"), Usage(cpu=100, billing=100, at=0.0))
    a1 = core.submit(spec(time_limit=10), 0.0, user="alice")[0]
    a2 = core.submit(spec(time_limit=10), 1.0, user="alice")[0]
    b1 = core.submit(spec(time_limit=10), 2.0, user="bob")[0]
    b2 = core.submit(spec(time_limit=10), 3.0, user="bob")[0]
    core.update(a2, {"priority": 100}, 4.0, "alice")
    core.update(b2, {"priority": 50}, 5.0, "bob")
    core.update(a1, {"cpus": 1, "mem": 32}, 6.0, "alice")  # not a priority: its place is kept
    f = core.priorities(6.0)
    assert [j for j, _ in sorted(f.items(), key=lambda kv: -kv[1].total)] == [b2, b1, a2, a1]
    full = OfferView("o-a0", "a0", "a0", "*", Resources.empty())
    assert core.expected_starts([OfferView("o-a0", "a0", "a0", "*", Resources.of(cpus=1, mem=1024))], 6.0) == {
        b2: 6.0, b1: 16.0, a2: 26.0, a1: 36.0,
    }  # fmt: skip
    cluster = Cluster(core, agents=1, cpus=1)
    assert cluster.round(6.0) == ["bob"]
    assert core.jobs[b2].state.value == "RUNNING"
    assert core.expected_starts([full], 7.0) == {b1: 16.0, a2: 26.0, a1: 36.0}
    assert {j: core.jobs[j].reason for j in (b1, a2, a1)} == dict.fromkeys(
        (b1, a2, a1), "waiting for 1 cpus; largest free offer has 0"
    )
