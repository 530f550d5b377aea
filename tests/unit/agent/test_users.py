"""Which user a task runs as: CommandInfo.user, else FrameworkInfo.user (Mesos --switch_user)."""

from __future__ import annotations

import os
import pwd

import pytest

from agent import users

ME = os.geteuid()
MY_NAME = pwd.getpwuid(ME).pw_name
NOBODY = pwd.getpwnam("nobody")


def test_command_user_wins_over_the_framework_user() -> None:
    if ME == 0:
        daemon = pwd.getpwnam("daemon")
        assert users.resolve_task("daemon", "nobody", allow_root=False) == users.RunAs("daemon", daemon.pw_uid, daemon.pw_gid)
    else:  # a demand the agent cannot honour is refused
        with pytest.raises(users.UserError, match="cannot run tasks"):
            users.resolve_task("daemon", "nobody", allow_root=False)
    with pytest.raises(users.UserError, match="unknown user"):
        users.resolve_task("no-such-user-here", "nobody", allow_root=False)


def test_the_framework_user_is_the_default() -> None:
    run_as = users.resolve_task(None, "nobody", allow_root=False)
    if ME == 0:  # a root agent switches to it
        assert run_as == users.RunAs("nobody", NOBODY.pw_uid, NOBODY.pw_gid)
    else:  # an agent that cannot switch runs the task as itself
        assert run_as is None
    assert users.resolve_task(None, "nobody", allow_root=False, switch_user=False) is None
    assert users.resolve_task(None, "", allow_root=False) is None
    assert users.resolve_task(None, "no-such-user-here", allow_root=False) is None  # a default, not a demand
    assert users.resolve_task(None, MY_NAME, allow_root=False) is None  # no switch to oneself

