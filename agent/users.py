"""Which user a task runs as (shell: reads the user database).

A task runs as the agent's own user unless its ``CommandInfo.user`` names another one. Rules
(RELIABILITY.md B3, S14): an unknown user is refused; uid 0 is refused unless the operator passed
``--allow-root-tasks`` — even when the master let the task through; switching to another user
needs the agent to run as root, and is done by ``setpriv`` (util-linux) in front of the command,
after the sandbox has been handed to that user.
"""

from __future__ import annotations

import os
import pwd
import shutil

import attrs


class UserError(ValueError):
    def __init__(self, message: str, reason: str = "REASON_TASK_INVALID") -> None:
        super().__init__(message)
        self.reason = reason


@attrs.frozen
class RunAs:
    name: str
    uid: int
    gid: int

    def wrap(self, argv: tuple[str, ...], setpriv: str) -> tuple[str, ...]:
        return (setpriv, f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--", *argv)


def resolve(user: str | None, allow_root: bool) -> RunAs | None:
    """None: run as the agent's user. Raises ``UserError`` for a user the task may not use."""
    me = os.geteuid()
    if not user:
        return None  # the agent's own identity (whatever the operator runs the agent as)
    try:
        pw = pwd.getpwnam(user)
    except KeyError:
        raise UserError(f"unknown user {user!r}") from None
    if pw.pw_uid == 0 and not allow_root:
        raise UserError("running tasks as root is not allowed on this agent (--allow-root-tasks)", "REASON_TASK_UNAUTHORIZED")
    if pw.pw_uid == me:
        return None
    if me != 0:
        raise UserError(f"the agent (uid {me}) cannot run tasks as {user!r}", "REASON_TASK_UNAUTHORIZED")
    if shutil.which("setpriv") is None:
        raise UserError(f"cannot switch to user {user!r}: setpriv is not installed")
    return RunAs(user, pw.pw_uid, pw.pw_gid)


def setpriv_path() -> str:
    return shutil.which("setpriv") or "setpriv"
