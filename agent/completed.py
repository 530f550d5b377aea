"""The finished work the agent still shows after it forgot a task (pure): Mesos' agent keeps its
completed executors per framework (``--max_completed_executors_per_framework``, 150), the
completed tasks of each executor (200) and its completed frameworks (50), and writes them in
``/state`` as ``completed_frameworks``, ``completed_executors`` and ``completed_tasks``.

A task enters the book when the agent forgets it (its terminal update was acknowledged); the
oldest entries leave first when a bound is reached. The views (``agent/mesos_views.py``) decide
what is *completed*: an executor without a task the agent still tracks, a framework without one.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import Generic, TypeVar

import attrs

__pure__ = True

MAX_COMPLETED_EXECUTORS_PER_FRAMEWORK = 150
MAX_COMPLETED_TASKS_PER_EXECUTOR = 200
MAX_COMPLETED_FRAMEWORKS = 50

T = TypeVar("T")
InfoT = TypeVar("InfoT")  # what describes the executor


@attrs.define
class CompletedExecutor(Generic[T, InfoT]):
    framework_id: str
    executor_id: str
    info: InfoT  # what the views need to write the executor (its ExecutorInfo, or None)
    tasks: deque[T]


class CompletedBook(Generic[T, InfoT]):
    def __init__(
        self,
        max_executors_per_framework: int = MAX_COMPLETED_EXECUTORS_PER_FRAMEWORK,
        max_tasks_per_executor: int = MAX_COMPLETED_TASKS_PER_EXECUTOR,
        max_frameworks: int = MAX_COMPLETED_FRAMEWORKS,
    ) -> None:
        self.max_executors = max_executors_per_framework
        self.max_tasks = max_tasks_per_executor
        self.max_frameworks = max_frameworks
        # framework -> executor -> entry; both in the order of their last finished task
        self._book: OrderedDict[str, OrderedDict[str, CompletedExecutor[T, InfoT]]] = OrderedDict()

    def task_done(self, framework_id: str, executor_id: str, info: InfoT, task: T) -> None:
        """``task`` of ``executor_id`` finished and was forgotten by the tracker."""
        execs = self._book.get(framework_id)
        if execs is None:
            execs = self._book[framework_id] = OrderedDict()
            while len(self._book) > self.max_frameworks:
                self._book.popitem(last=False)
        else:
            self._book.move_to_end(framework_id)
        ex = execs.get(executor_id)
        if ex is None:
            ex = execs[executor_id] = CompletedExecutor(framework_id, executor_id, info, deque(maxlen=self.max_tasks))
            while len(execs) > self.max_executors:
                execs.popitem(last=False)
        else:
            execs.move_to_end(executor_id)
            if info is not None:
                ex.info = info
        ex.tasks.append(task)

    def tasks(self, framework_id: str, executor_id: str) -> list[T]:
        """The forgotten tasks of an executor, oldest first."""
        execs = self._book.get(framework_id)
        ex = execs.get(executor_id) if execs is not None else None
        return list(ex.tasks) if ex is not None else []

    def executors(self, framework_id: str) -> list[CompletedExecutor[T, InfoT]]:
        """The framework's executors with a forgotten task, oldest first."""
        execs = self._book.get(framework_id)
        return list(execs.values()) if execs is not None else []

    def frameworks(self) -> list[str]:
        """The frameworks with a forgotten task, oldest first."""
        return list(self._book)
