"""``--config FILE.toml`` of the agent and the framework services (``protocol/config_file.py``):
keys are long flags, the command's table or the top level, exact errors."""

from __future__ import annotations

import re

import pytest

from protocol.config_file import ConfigFileError, Flag, flag_defaults

FLAGS = [
    Flag("config", ("--config",)),
    Flag("work_dir", ("--work-dir",)),
    Flag("resend_initial", ("--status-update-retry-interval-min", "--resend-initial")),
    Flag("cgroups_enable_cfs", ("--cgroups-enable-cfs", "--no-cgroups-enable-cfs")),
    Flag("host", ("--ip",)),
    Flag("attr", ("--attr",), multiple=True),
]


def test_keys_are_long_flags_or_parameter_names() -> None:
    doc = {"work-dir": "/var/lib/agora", "status-update-retry-interval-min": 5, "cgroups-enable-cfs": False,
           "ip": "0.0.0.0", "attr": ["a", "b"]}
    assert flag_defaults(doc, "agent", FLAGS, top_level=True) == {
        "work_dir": "/var/lib/agora", "resend_initial": 5, "cgroups_enable_cfs": False, "host": "0.0.0.0",
        "attr": ["a", "b"],
    }
    assert flag_defaults({"work_dir": "/w", "resend-initial": 1}, "agent", FLAGS, top_level=True) == {
        "work_dir": "/w", "resend_initial": 1,
    }


def test_the_commands_table() -> None:
    assert flag_defaults({"agent": {"work-dir": "/w"}}, "agent", FLAGS, top_level=True) == {"work_dir": "/w"}
    doc = {"batch": {"ip": "0.0.0.0"}, "users": {"default_os_user": "nobody"}}
    assert flag_defaults(doc, "batch", FLAGS, top_level=False) == {"host": "0.0.0.0"}
    assert flag_defaults({"users": {}}, "batch", FLAGS, top_level=False) == {}


@pytest.mark.parametrize(
    ("doc", "top", "why"),
    [
        ({"wrok-dir": "/w"}, True, "unknown key 'wrok-dir' (the keys are the command's long flags without '--')"),
        ({"config": "other.toml"}, True, "unknown key 'config'"),
        ({"no-cgroups-enable-cfs": True}, True, "unknown key 'no-cgroups-enable-cfs'"),
        ({"agent": {"work-dir": "/w"}, "ip": "x"}, True, "unknown key 'ip': with a [agent] table every flag goes in it"),
        ({"agent": "x"}, True, "[agent] must be a table"),
        ({"work-dir": ["/a", "/b"]}, True, "work-dir: one value, not a list"),
        ({"attr": "a"}, True, "attr: a list (the flag may be given many times)"),
        ({"ip": {"x": 1}}, True, "ip: a value, not a table"),
        ({"resend-initial": 1, "status-update-retry-interval-min": 2}, True, "given twice"),
    ],
)
def test_bad_files_name_the_key(doc: dict[str, object], top: bool, why: str) -> None:
    with pytest.raises(ConfigFileError, match=re.escape(why)):
        flag_defaults(doc, "agent", FLAGS, top_level=top)
