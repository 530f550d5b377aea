"""Which isolator ``--isolation`` picks for what the kernel offers (agent.cgroup_probe, pure):
exact candidates and reasons for a cgroup-v1 host (this machine's own mount table), a delegated
cgroup2 host, a cgroup2 host whose agent sits in the root cgroup, and the names of cgroups."""

from __future__ import annotations

import pytest

from agent.cgroup_probe import (
    Candidate,
    Mount,
    agent_cgroup_name,
    choose,
    parse_mountinfo,
    parse_proc_cgroup,
    task_cgroup_name,
)

# /proc/self/mountinfo and /proc/self/cgroup of a hybrid host (memory on v1, cgroup2 with no
# controllers but hugetlb), as read on the machine these tests were written on
HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
34 31 0:31 / /sys/fs/cgroup/cpuset rw,relatime - cgroup cgroup rw,cpuset
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""
HYBRID_CGROUP = """\
9:name=systemd:/
8:pids:/
6:freezer:/
4:memory:/process_api/cf05
2:cpuacct:/
1:cpu:/
0::/
"""
# a systemd host, pure cgroup2, the agent a service with Delegate=yes
V2_MOUNTINFO = "30 24 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
V2_CGROUP = "0::/system.slice/agora-agent.service\n"


def test_parse_the_hybrid_host() -> None:
    mounts = parse_mountinfo(HYBRID_MOUNTINFO)
    assert [(m.version, m.path, sorted(m.controllers)) for m in mounts] == [
        (1, "/sys/fs/cgroup/cpu", ["cpu"]),
        (1, "/sys/fs/cgroup/cpuacct", ["cpuacct"]),
        (1, "/sys/fs/cgroup/cpuset", ["cpuset"]),
        (1, "/sys/fs/cgroup/memory", ["memory"]),
        (1, "/sys/fs/cgroup/freezer", ["freezer"]),
        (1, "/sys/fs/cgroup/pids", ["pids"]),
        (1, "/sys/fs/cgroup/systemd", []),
        (2, "/sys/fs/cgroup/unified", []),
    ]
    own = parse_proc_cgroup(HYBRID_CGROUP)
    assert own["memory"] == "/process_api/cf05" and own[""] == "/" and own["name=systemd"] == "/"


def test_co_mounted_controllers_and_escaped_paths() -> None:
    text = r"32 31 0:29 / /sys/fs/cgroup/cpu\040acct rw - cgroup cgroup rw,cpu,cpuacct" + "\n"
    [m] = parse_mountinfo(text)
    assert m == Mount(1, "/sys/fs/cgroup/cpu acct", "/", frozenset({"cpu", "cpuacct"}))


def test_hybrid_host_chooses_v1_and_says_why_not_v2() -> None:
    mounts = parse_mountinfo(HYBRID_MOUNTINFO)
    own = parse_proc_cgroup(HYBRID_CGROUP)
    c = choose("auto", mounts, own, frozenset({"hugetlb"}), cgroups_root="agora", agent_name="agent-x")
    assert c.candidates == (
        Candidate("cgroups-v1", v1_dirs=(
            ("memory", "/sys/fs/cgroup/memory/agora/agent-x"),
            ("cpu", "/sys/fs/cgroup/cpu/agora/agent-x"),
            ("cpuacct", "/sys/fs/cgroup/cpuacct/agora/agent-x"),
            ("freezer", "/sys/fs/cgroup/freezer/agora/agent-x"),
            ("pids", "/sys/fs/cgroup/pids/agora/agent-x"),
        )),
        Candidate("psutil"),
    )
    assert c.passed_over == (
        "cgroups-v2: the agent runs in the root cgroup of /sys/fs/cgroup/unified, not in a delegated subtree "
        "(run it as a systemd service with Delegate=yes)",
    )


def test_v2_in_a_subtree_without_the_controllers() -> None:
    mounts = parse_mountinfo(HYBRID_MOUNTINFO)
    own = {**parse_proc_cgroup(HYBRID_CGROUP), "": "/agora-test"}
    c = choose("cgroups-v2", mounts, own, frozenset({"hugetlb"}), cgroups_root="agora", agent_name="a")
    assert c.candidates == (Candidate("psutil"),)
    assert c.passed_over == (
        "cgroups-v2: /sys/fs/cgroup/unified/agora-test offers controllers [hugetlb], not memory and cpu "
        "(bound to cgroup v1 hierarchies, or not delegated)",
    )


def test_delegated_v2_host() -> None:
    mounts = parse_mountinfo(V2_MOUNTINFO)
    own = parse_proc_cgroup(V2_CGROUP)
    c = choose("auto", mounts, own, frozenset({"cpu", "memory", "pids", "io"}), cgroups_root="agora", agent_name="a")
    assert c.candidates == (
        Candidate("cgroups-v2", v2_dir="/sys/fs/cgroup/system.slice/agora-agent.service"),
        Candidate("psutil"),
    )
    assert c.passed_over == ("cgroups-v1: memory, cpu, cpuacct not mounted as cgroup v1",)


def test_psutil_when_asked_and_nothing_when_unmounted() -> None:
    assert choose("psutil", [], {}, frozenset(), cgroups_root="agora", agent_name="a").candidates == (Candidate("psutil"),)
    c = choose("cgroups-v1", [], {}, frozenset(), cgroups_root="agora", agent_name="a")
    assert c.candidates == (Candidate("psutil"),)
    assert c.passed_over == ("cgroups-v1: memory, cpu, cpuacct not mounted as cgroup v1",)
    with pytest.raises(ValueError):
        choose("docker", [], {}, frozenset(), cgroups_root="agora", agent_name="a")


def test_cgroup_names() -> None:
    assert task_cgroup_name("t/fw-1/task.7") == "fw-1.task.7"
    odd = task_cgroup_name("t/fw/a b*c")
    assert odd.startswith("fw.a_b_c-") and " " not in odd and odd != task_cgroup_name("t/fw/a_b_c")
    assert agent_cgroup_name("/var/lib/agora") == agent_cgroup_name("/var/lib/agora")
    assert agent_cgroup_name("/var/lib/agora") != agent_cgroup_name("/var/lib/agora2")
    assert agent_cgroup_name("/w").startswith("agent-") and len(agent_cgroup_name("/w")) == 18
