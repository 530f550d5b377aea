"""The preemption planner's exact choices: the fewest lower-priority tasks, gangs whole (never
half), ties to lower priority then the youngest, and nothing when eviction cannot make room."""

from __future__ import annotations

from frameworks.batch.preempt import Candidate, Need, choose


def task(job: int, index: int, agent: str, cpus: float, *, prio: int = 0, started: float = 0.0,
         gang: bool = False) -> Candidate:  # fmt: skip
    return Candidate(job, index, f"j{job}-{index}-0", agent, prio, {"cpus": cpus, "mem": 100.0}, started, gang)


def need(count: int, cpus: float, prio: int = 10) -> Need:
    return Need(job_id=99, priority=prio, shape={"cpus": cpus, "mem": 100.0}, count=count)


def ids(victims: tuple[Candidate, ...] | None) -> list[str] | None:
    return None if victims is None else [v.task_id for v in victims]


FULL = {"cpus": 0.0, "mem": 1000.0}


def test_one_big_task_rather_than_two_small_ones_even_of_lower_priority() -> None:
    victims = choose(
        need(1, 4),
        {"a": FULL},
        [task(1, 0, "a", 2, prio=0), task(1, 1, "a", 2, prio=0), task(2, 0, "a", 4, prio=5)],
    )
    assert ids(victims) == ["j2-0-0"]


def test_among_equally_few_the_lower_priority_then_the_youngest() -> None:
    cands = [task(1, 0, "a", 4, prio=3), task(2, 0, "b", 4, prio=1, started=10), task(3, 0, "b", 4, prio=1, started=20)]
    assert ids(choose(need(1, 4), {"a": FULL, "b": FULL}, cands)) == ["j3-0-0"]


def test_room_already_free_counts_so_only_the_rest_is_evicted() -> None:
    # agent a has 2 cpus free: with one 2-cpu task gone a 4-cpu task fits there
    victims = choose(
        need(1, 4),
        {"a": {"cpus": 2.0, "mem": 1000.0}, "b": FULL},
        [task(1, 0, "a", 2), task(2, 0, "b", 4)],
    )
    assert ids(victims) == ["j1-0-0"]


def test_a_gang_goes_whole_and_only_when_it_is_the_fewest() -> None:
    # a: a gang rank (2 cpus) and a single (2 cpus); b: the other gang rank (2 cpus) and 2 free.
    # Evicting the gang (2 tasks) frees 4 cpus on b; nothing smaller makes room for 4 cpus.
    cands = [
        task(1, 0, "a", 2, gang=True),
        task(1, 1, "b", 2, gang=True),
        task(2, 0, "a", 2),
    ]
    victims = choose(need(1, 4), {"a": FULL, "b": {"cpus": 2.0, "mem": 1000.0}}, cands)
    assert ids(victims) == ["j1-0-0", "j1-1-0"]


def test_a_gang_rank_on_an_agent_the_preemptor_cannot_use_goes_with_its_gang() -> None:
    # the gang (2 tasks, one on an agent of no use here) or two singles (2 tasks): the gang's
    # lower priority decides, and both its ranks go
    cands = [task(1, 0, "a", 4, gang=True), task(1, 1, "elsewhere", 4, gang=True),
             task(2, 0, "a", 2, prio=1), task(3, 0, "a", 2, prio=1)]  # fmt: skip
    assert ids(choose(need(1, 4), {"a": FULL}, cands)) == ["j1-0-0", "j1-1-0"]


def test_on_a_full_tie_single_tasks_go_before_a_gang() -> None:
    cands = [task(1, 0, "a", 4, gang=True), task(1, 1, "elsewhere", 4, gang=True), task(2, 0, "a", 2), task(3, 0, "a", 2)]
    assert ids(choose(need(1, 4), {"a": FULL}, cands)) == ["j2-0-0", "j3-0-0"]


def test_a_gang_preemptor_is_made_room_for_across_agents() -> None:
    cands = [task(1, 0, "a", 2), task(2, 0, "b", 2), task(3, 0, "c", 2, prio=1), task(4, 0, "c", 2)]
    # 3 tasks of 2 cpus; a, b, c each full: one victim per agent, the lower priority on c
    victims = choose(need(3, 2), {"a": FULL, "b": FULL, "c": FULL}, cands)
    assert ids(victims) == ["j1-0-0", "j2-0-0", "j4-0-0"]


def test_nothing_is_evicted_when_evicting_everything_would_not_be_enough() -> None:
    assert choose(need(1, 8), {"a": FULL}, [task(1, 0, "a", 2), task(2, 0, "a", 2)]) is None


def test_equal_or_higher_priority_tasks_are_never_victims() -> None:
    assert choose(need(1, 4, prio=5), {"a": FULL}, [task(1, 0, "a", 4, prio=5), task(2, 0, "a", 4, prio=7)]) is None


def test_no_victims_when_it_already_fits() -> None:
    assert choose(need(1, 2), {"a": {"cpus": 2.0, "mem": 1000.0}}, [task(1, 0, "a", 2)]) == ()
