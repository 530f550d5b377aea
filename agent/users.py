"""Which user a task runs as (shell: reads the user database).

A task runs as its ``CommandInfo.user``, else as its framework's ``FrameworkInfo.user`` (as Mesos'
``--switch_user``; ``--no-switch-user`` turns the fallback off), else as the agent's own user. The
framework's user is a default, not a demand: it is used only when the agent can switch to it (the
agent runs as root and the user exists here; otherwise the task runs as the agent's user, with a
log line), and naming the agent's own user is no switch at all. An explicit ``CommandInfo.user`` is
a demand. Rules: an unknown user is refused; uid 0 is refused unless the operator passed
``--allow-root-tasks`` — even when the master let the task through; switching to another user
needs the agent to run as root, and is done by ``setpriv`` (util-linux) in front of the command,
after the sandbox has been handed to that user.
"""

from __future__ import annotations

import functools
import logging
import os
import pwd
import shutil
from pathlib import Path

from agent.taskspec import RunAs

__all__ = ["RunAs", "UserError", "enter", "resolve", "resolve_task", "setpriv_path"]

log = logging.getLogger(__name__)


class UserError(ValueError):
    def __init__(self, message: str, reason: str = "REASON_TASK_INVALID") -> None:
        super().__init__(message)
        self.reason = reason


def enter(run_as: RunAs, sandbox: Path, argv: tuple[str, ...], setpriv: str) -> tuple[str, ...]:
    """Hand the sandbox to ``run_as``'s user; returns ``argv`` wrapped to drop privileges to it."""
    sandbox.mkdir(parents=True, exist_ok=True)
    os.chown(sandbox, run_as.uid, run_as.gid)
    return run_as.wrap(argv, setpriv)


def resolve(user: str | None, allow_root: bool) -> RunAs | None:
    """None: run as the agent's user. Raises ``UserError`` for a user the task may not use."""
    if not user:
        return None  # the agent's own identity (whatever the operator runs the agent as)
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise UserError(f"unknown user {user!r}") from None
    return _switch_to(user, pw, allow_root)


def _switch_to(user: str, pw: pwd.struct_passwd, allow_root: bool) -> RunAs | None:
    """The rules for a user that exists here (its entry ``pw`` already looked up)."""
    me = os.geteuid()
    if pw.pw_uid == 0 and not allow_root:
        raise UserError("running tasks as root is not allowed on this agent (--allow-root-tasks)", "REASON_TASK_UNAUTHORIZED")
    if pw.pw_uid == me:
        return None
    if me != 0:
        raise UserError(f"the agent (uid {me}) cannot run tasks as {user!r}", "REASON_TASK_UNAUTHORIZED")
    if _which_setpriv() is None:
        raise UserError(f"cannot switch to user {user!r}: setpriv is not installed")
    return RunAs(user, pw.pw_uid, pw.pw_gid)


def resolve_task(
    command_user: str | None, framework_user: str | None, *, allow_root: bool, switch_user: bool = True
) -> RunAs | None:
    """The identity a task (or executor) runs as: its ``CommandInfo.user`` (a demand: refused
    if it cannot be honoured), else the framework's ``FrameworkInfo.user`` when ``switch_user``
    (a default: root still needs ``allow_root``, but a user this agent cannot switch to - absent
    here, or the agent is not root - means the agent's own user), else None (the agent's user)."""
    if command_user:
        return resolve(command_user, allow_root)
    if not switch_user or not framework_user:
        return None
    try:
        pw = pwd.getpwnam(framework_user)
    except KeyError:
        log.warning("framework user %r does not exist here: the task runs as the agent's user", framework_user)
        return None
    me = os.geteuid()
    if pw.pw_uid == me:
        return None  # the agent's own identity: nothing to switch
    if me != 0:
        log.debug("the agent (uid %d) cannot switch to framework user %r", me, framework_user)
        return None
    return _switch_to(framework_user, pw, allow_root)


@functools.cache
def _which_setpriv() -> str | None:
    """One PATH scan per process, not one per task switched to another user."""
    return shutil.which("setpriv")


def setpriv_path() -> str:
    return _which_setpriv() or "setpriv"
