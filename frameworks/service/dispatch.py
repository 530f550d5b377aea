"""Which service task goes to which warm instance, and what each result means (pure).

A *service job* names a command that runs once per slot (a *service instance*) and a list of
*inputs*; each input is a *service task*: sent to an instance over its channel, answered with a
result line or a failure. The dispatcher owns every service job's tasks and the book of its
instances (``book.ServiceBook``); its owner (the batch service) feeds it facts and carries out
what it returns. Time is an argument.

Rules:

- A task goes to a CONNECTED instance of its job with room in its window, oldest first.
- A result ends the task: ``ok`` -> DONE with the result; a failure -> sent again (to whichever
  instance has room next) while it has retries left (``max_retries`` per task, like an ordinary
  task's), else FAILED with the worker's message.
- An instance that ended (``gone``): the task it was working on (the oldest it had not answered)
  counts a failure when the instance failed by itself (``blame``: its command crashed, exited or
  broke the protocol; the task may be what killed it) and is retried like a failed task; the
  tasks queued behind it never started and go back to the front of the queue at no cost. An
  instance that was killed or lost with its agent spends nothing.
- A job is *finished* when no task is PENDING or SENT; then its instances are told to stop.
  ``cancel`` ends the tasks that have not ended (CANCELLED); answers that come later are ignored.
"""

from __future__ import annotations

import collections
import enum
from collections.abc import Iterable, Mapping, Sequence

import attrs

from frameworks.service.book import Instance, InstanceState, ServiceBook
from frameworks.service.wire import VERSION

__pure__ = True


class TaskState(enum.Enum):
    PENDING = "PENDING"
    SENT = "SENT"
    DONE = "DONE"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


ENDED = frozenset({TaskState.DONE, TaskState.FAILED, TaskState.CANCELLED})


@attrs.define(eq=False, slots=True)
class ServiceTask:
    index: int
    input: str
    state: TaskState = TaskState.PENDING
    sends: int = 0  # how many times it was sent to an instance
    failures: int = 0
    result: str | None = None  # the result (DONE) or the latest failure's message
    instance: str | None = None  # the instance it was last sent to
    sent_at: float | None = None  # the latest send
    ended_at: float | None = None


@attrs.frozen
class Ended:
    """A task's answer, as decided: ``state`` DONE or FAILED, or PENDING when it is retried."""

    job_id: int
    index: int
    state: TaskState
    text: str


@attrs.define(eq=False)
class ServiceRun:
    """One service job's tasks."""

    job_id: int
    token: str
    window: int
    max_retries: int
    tasks: list[ServiceTask]
    queue: collections.deque[int] = attrs.field(factory=collections.deque)
    counts: dict[TaskState, int] = attrs.field(factory=dict)

    def count(self, state: TaskState) -> int:
        return self.counts.get(state, 0)

    @property
    def finished(self) -> bool:
        return self.count(TaskState.PENDING) == 0 and self.count(TaskState.SENT) == 0

    def failure(self) -> str | None:
        """Why the job failed (None: every task is DONE)."""
        failed, cancelled = self.count(TaskState.FAILED), self.count(TaskState.CANCELLED)
        n = len(self.tasks)
        if failed:
            return f"{failed} of {n} service tasks failed"
        if cancelled:
            return f"{cancelled} of {n} service tasks cancelled"
        return None

    def summary(self) -> dict[str, int]:
        return {s.value.lower(): self.count(s) for s in TaskState} | {"total": len(self.tasks)}


class Dispatcher:
    def __init__(self) -> None:
        self.book: ServiceBook[int] = ServiceBook()
        self.runs: dict[int, ServiceRun] = {}
        self.dirty: set[tuple[int, int]] = set()  # (job, index) of tasks changed since ``take_dirty``

    # --- jobs --------------------------------------------------------------------------------

    def add(
        self, job_id: int, inputs: Sequence[str], token: str, window: int, max_retries: int,
        restored: Mapping[int, tuple[TaskState, int, int, str | None, float | None]] | None = None,
    ) -> ServiceRun:
        """A service job's tasks; ``restored``: index -> (state, failures, sends, result,
        ended_at) of those that had ended (or were sent: they are sent again) before a restart."""
        if job_id in self.runs:
            raise ValueError(f"service job {job_id} exists")
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        run = ServiceRun(job_id, token, window, max_retries, [ServiceTask(i, text) for i, text in enumerate(inputs)])
        for index, (state, failures, sends, result, ended_at) in (restored or {}).items():
            t = run.tasks[index]
            t.failures, t.sends = failures, sends
            if state in ENDED:
                t.state, t.result, t.ended_at = state, result, ended_at
        for t in run.tasks:
            run.counts[t.state] = run.counts.get(t.state, 0) + 1
            if t.state is TaskState.PENDING:
                run.queue.append(t.index)
        self.runs[job_id] = run
        return run

    def forget(self, job_id: int) -> None:
        """Drop an ended job's tasks from memory (they are in the store)."""
        self.runs.pop(job_id, None)

    def cancel(self, job_id: int, now: float, why: str = "cancelled") -> list[int]:
        """End every task that has not ended; the instances of the job are to be stopped.
        Returns the indexes cancelled."""
        run = self.runs.get(job_id)
        if run is None:
            return []
        out = []
        for t in run.tasks:
            if t.state in (TaskState.PENDING, TaskState.SENT):
                self._set(run, t, TaskState.CANCELLED)
                t.result, t.ended_at = why, now
                out.append(t.index)
        run.queue.clear()
        for inst in self.book.of(job_id):
            inst.inflight.clear()
        return out

    # --- instances ---------------------------------------------------------------------------

    def launched(self, instance_id: str, job_id: int, agent_id: str | None = None, running: bool = False) -> Instance[int] | None:
        """An instance's task was launched (or found running after a restart)."""
        run = self.runs.get(job_id)
        if run is None:
            return None
        inst = self.book.get(instance_id)
        if inst is None:
            state = InstanceState.RUNNING if running else InstanceState.LAUNCHING
            inst = self.book.add(instance_id, job_id, run.window, agent_id, state=state)
        return inst

    def running(self, instance_id: str) -> None:
        self.book.running(instance_id)

    def hello(self, instance_id: str, version: int, token: str) -> tuple[Instance[int] | None, str | None]:
        """An instance opened its channel: (the instance, None) when it may take tasks, else
        (None, why it is refused)."""
        if version != VERSION:
            return None, f"channel version {version} is not {VERSION}"
        inst = self.book.get(instance_id)
        if inst is None:
            return None, f"no service instance {instance_id}"
        run = self.runs.get(int(inst.owner))
        if run is None or token != run.token:
            return None, "wrong token"
        if inst.state is InstanceState.CONNECTED:
            # It connected again (its channel broke, perhaps unnoticed here yet): what it had in
            # flight goes back to the front of the queue at no cost (the executor drops the
            # answers to what was sent on the old channel); sequence numbers go on, so a late
            # answer on the old channel matches nothing.
            back = [i for i in inst.inflight.values() if run.tasks[i].state is TaskState.SENT]
            inst.inflight.clear()
            for index in reversed(back):
                self._set(run, run.tasks[index], TaskState.PENDING)
                run.queue.appendleft(index)
            return inst, None
        if self.book.connected(instance_id) is None:
            return None, f"instance {instance_id} is {inst.state.name}"
        return inst, None

    def take(self, instance_id: str, now: float) -> list[tuple[int, str]]:
        """Tasks to send to the instance now, as (seq, input): as many as its window has room for."""
        inst = self.book.get(instance_id)
        if inst is None or inst.room <= 0:
            return []
        run = self.runs.get(int(inst.owner))
        if run is None:
            return []
        out: list[tuple[int, str]] = []
        room = inst.room
        queue, tasks = run.queue, run.tasks
        while room > 0 and queue:
            t = tasks[queue.popleft()]
            if t.state is not TaskState.PENDING:
                continue
            self._set(run, t, TaskState.SENT)
            t.sends += 1
            t.instance, t.sent_at = instance_id, now
            out.append((self.book.send(inst, t.index), t.input))
            room -= 1
        return out

    def wanting(self, job_id: int) -> list[Instance[int]]:
        """Connected instances of the job with room, while it has tasks waiting."""
        run = self.runs.get(job_id)
        if run is None or not run.queue:
            return []
        return [i for i in self.book.of(job_id) if i.room > 0]

    def results(self, instance_id: str, items: Iterable[tuple[int, bool, str]], now: float) -> list[Ended]:
        """Answers from an instance: what each means (answers for tasks no longer in flight
        there, e.g. cancelled, are left out)."""
        inst = self.book.get(instance_id)
        if inst is None:
            return []
        run = self.runs.get(int(inst.owner))
        out: list[Ended] = []
        for seq, ok, text in items:
            index = self.book.answer(inst, seq)
            if index is None or run is None:
                continue
            t = run.tasks[index]
            if t.state is not TaskState.SENT:
                continue
            if ok:
                self._set(run, t, TaskState.DONE)
                t.result, t.ended_at = text, now
                out.append(Ended(run.job_id, index, TaskState.DONE, text))
            else:
                out.append(self._failed(run, t, text, now))
        return out

    def stopping(self, instance_id: str, why: str) -> None:
        inst = self.book.get(instance_id)
        if inst is not None:
            self.book.stopping(inst, why)

    def gone(self, instance_id: str, message: str, now: float, *, blame: bool) -> list[Ended]:
        """The instance's task ended: its unanswered tasks are sent again (see the rules)."""
        inst, head, rest = self.book.gone(instance_id, message)
        if inst is None:
            return []
        run = self.runs.get(int(inst.owner))
        if run is None:
            return []
        out: list[Ended] = []
        back = [i for i in rest if run.tasks[i].state is TaskState.SENT]
        for index in reversed(back):
            t = run.tasks[index]
            self._set(run, t, TaskState.PENDING)
            run.queue.appendleft(index)
        if head is not None and run.tasks[head].state is TaskState.SENT:
            t = run.tasks[head]
            if blame:
                out.append(self._failed(run, t, f"its service instance ended: {message}", now))
            else:
                self._set(run, t, TaskState.PENDING)
                run.queue.appendleft(head)
        return out

    def instances(self, job_id: int) -> list[Instance[int]]:
        return list(self.book.of(job_id))

    # --- persistence ---------------------------------------------------------------------------

    def take_dirty(self) -> list[tuple[int, ServiceTask]]:
        """Tasks changed since the last call (for the store), by job and index."""
        out = []
        for job_id, index in sorted(self.dirty):
            run = self.runs.get(job_id)
            if run is not None:
                out.append((job_id, run.tasks[index]))
        self.dirty.clear()
        return out

    # --- internals -----------------------------------------------------------------------------

    def _failed(self, run: ServiceRun, t: ServiceTask, text: str, now: float) -> Ended:
        t.failures += 1
        t.result = text
        if t.failures <= run.max_retries:
            self._set(run, t, TaskState.PENDING)
            run.queue.append(t.index)  # behind the others: a task that kills instances goes last
            return Ended(run.job_id, t.index, TaskState.PENDING, text)
        self._set(run, t, TaskState.FAILED)
        t.ended_at = now
        return Ended(run.job_id, t.index, TaskState.FAILED, text)

    def _set(self, run: ServiceRun, t: ServiceTask, state: TaskState) -> None:
        if t.state is state:
            return
        counts = run.counts
        counts[t.state] -= 1
        counts[state] = counts.get(state, 0) + 1
        t.state = state
        self.dirty.add((run.job_id, t.index))
