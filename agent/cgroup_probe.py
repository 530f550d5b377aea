"""Which isolator this kernel allows, and where its cgroups go (pure).

The shell (``agent.isolation.detect``) reads ``/proc/self/mountinfo``, ``/proc/self/cgroup`` and,
for a cgroup2 hierarchy, the agent's own ``cgroup.controllers``; ``parse_mountinfo`` and
``parse_proc_cgroup`` turn that text into ``Mount``s and the agent's cgroup paths, and ``choose``
orders the isolators worth trying, each with the reason the better ones were passed over:

- ``cgroups-v2``: the agent's own cgroup is on a cgroup2 hierarchy, is not that hierarchy's root
  (a root cgroup is never delegated: moving "every process of our cgroup" would move the whole
  machine) and offers ``memory`` and ``cpu`` (systemd ``Delegate=yes`` gives this);
- ``cgroups-v1``: ``memory``, ``cpu`` and ``cpuacct`` are mounted as cgroup v1 hierarchies
  (``freezer`` and ``pids`` are used when mounted too); tasks go to
  ``<hierarchy>/<cgroups_root>/<agent>/<task>`` as in Mesos (``--cgroups_root``), ``<agent>``
  naming this agent's work dir so several agents on one machine never share a subtree;
- ``psutil``: sampling ``/proc`` (no kernel limits), always possible.

Whether a directory is really writable is only known by trying (a read-only mount, a container
without the capability): the shell tries the candidates in order and falls back with the reason.
"""

from __future__ import annotations

import hashlib
import re

import attrs

__pure__ = True

ISOLATIONS = ("auto", "cgroups-v2", "cgroups-v1", "psutil")
V1_REQUIRED = ("memory", "cpu", "cpuacct")
V1_OPTIONAL = ("freezer", "pids")
V2_REQUIRED = ("memory", "cpu")
_KNOWN_V1 = frozenset({*V1_REQUIRED, *V1_OPTIONAL, "cpuset", "blkio", "devices", "net_cls", "net_prio",
                       "perf_event", "hugetlb", "rdma", "misc", "io"})


@attrs.frozen
class Mount:
    version: int  # 1 or 2
    path: str  # where it is mounted
    root: str  # the hierarchy path mounted there (mountinfo field 4; "/" normally)
    controllers: frozenset[str] = frozenset()  # v1: from the mount options; v2: filled by the caller


def parse_mountinfo(text: str) -> list[Mount]:
    """The cgroup and cgroup2 mounts of a ``/proc/self/mountinfo`` text."""
    out: list[Mount] = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        lf, rf = left.split(), right.split()
        if len(lf) < 5 or len(rf) < 3:
            continue
        fstype = rf[0]
        if fstype == "cgroup2":
            out.append(Mount(2, _unescape(lf[4]), _unescape(lf[3])))
        elif fstype == "cgroup":
            opts = set(rf[2].split(","))
            out.append(Mount(1, _unescape(lf[4]), _unescape(lf[3]), frozenset(opts & _KNOWN_V1)))
    return out


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (``\\040``)."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def parse_proc_cgroup(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as {controller: path}; the cgroup2 entry (``0::/path``) under ``""``
    and named hierarchies under their ``name=...``."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, ctrls, path = parts
        if ctrls == "":
            out[""] = path
            continue
        for c in ctrls.split(","):
            out[c] = path
    return out


@attrs.frozen
class Candidate:
    isolator: str  # "cgroups-v2" | "cgroups-v1" | "psutil"
    v2_dir: str | None = None  # cgroups-v2: the agent's own cgroup directory
    v1_dirs: tuple[tuple[str, str], ...] = ()  # cgroups-v1: (controller, the agent's base directory)


@attrs.frozen
class Choice:
    candidates: tuple[Candidate, ...]  # in the order to try; the last is always psutil
    passed_over: tuple[str, ...]  # why the better isolators were not candidates


def agent_cgroup_name(work_dir: str) -> str:
    """This agent's own subtree under the cgroups root: stable across restarts (recovery finds
    its tasks' cgroups again), distinct for every work dir on the machine."""
    return "agent-" + hashlib.sha256(work_dir.encode()).hexdigest()[:12]


def task_cgroup_name(key: str) -> str:
    """A task's cgroup directory name from its key (``t/<framework>/<task>``): the ids with
    anything but ``[A-Za-z0-9_.-]`` replaced, plus a digest when something was (two ids that
    differ only there must not share a cgroup); never whitespace (the wrapper splits the list)."""
    body = key[2:] if key.startswith("t/") else key
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", body.replace("/", "."))
    if safe != body.replace("/", ".") or safe in (".", ".."):
        safe = f"{safe[:80]}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"
    return safe


def _join(*parts: str) -> str:
    out = parts[0].rstrip("/")
    for p in parts[1:]:
        p = p.strip("/")
        if p:
            out += "/" + p
    return out or "/"


def _v2_reason(mounts: list[Mount], own: dict[str, str], v2_controllers: frozenset[str]) -> tuple[str | None, str]:
    """The agent's cgroup2 directory if usable, else None; and why not."""
    v2 = [m for m in mounts if m.version == 2]
    rel = own.get("")
    if not v2 or rel is None:
        return None, "cgroups-v2: no cgroup2 hierarchy is mounted"
    m = v2[0]
    if not rel.startswith(m.root.rstrip("/") + "/") and rel != m.root:
        return None, f"cgroups-v2: the agent's cgroup {rel} is not under the cgroup2 mount {m.path}"
    if rel in ("/", ""):
        return None, (f"cgroups-v2: the agent runs in the root cgroup of {m.path}, not in a delegated subtree "
                      "(run it as a systemd service with Delegate=yes)")
    missing = [c for c in V2_REQUIRED if c not in v2_controllers]
    if missing:
        offered = " ".join(sorted(v2_controllers)) or "none"
        return None, (f"cgroups-v2: {m.path}{rel} offers controllers [{offered}], not {' and '.join(missing)}"
                      " (bound to cgroup v1 hierarchies, or not delegated)")
    tail = rel[len(m.root.rstrip("/")):] if m.root != "/" else rel
    return _join(m.path, tail), ""


def choose(
    prefer: str,
    mounts: list[Mount],
    own: dict[str, str],
    v2_controllers: frozenset[str],
    *,
    cgroups_root: str,
    agent_name: str,
) -> Choice:
    """The isolators to try for ``--isolation prefer``, best first (see the module doc)."""
    if prefer not in ISOLATIONS:
        raise ValueError(f"unknown isolation {prefer!r}")
    passed: list[str] = []
    cands: list[Candidate] = []
    if prefer == "psutil":
        return Choice((Candidate("psutil"),), ("--isolation psutil",))
    if prefer in ("auto", "cgroups-v2"):
        d, why = _v2_reason(mounts, own, v2_controllers)
        if d is not None:
            cands.append(Candidate("cgroups-v2", v2_dir=d))
        else:
            passed.append(why)
    if prefer in ("auto", "cgroups-v1"):
        v1: dict[str, Mount] = {}
        for m in mounts:
            if m.version == 1:
                for c in m.controllers:
                    v1.setdefault(c, m)
        missing = [c for c in V1_REQUIRED if c not in v1]
        if missing:
            passed.append(f"cgroups-v1: {', '.join(missing)} not mounted as cgroup v1")
        else:
            dirs = tuple(
                (c, _join(v1[c].path, cgroups_root, agent_name)) for c in (*V1_REQUIRED, *V1_OPTIONAL) if c in v1
            )
            cands.append(Candidate("cgroups-v1", v1_dirs=dirs))
    cands.append(Candidate("psutil"))
    return Choice(tuple(cands), tuple(passed))


__all__ = [
    "ISOLATIONS",
    "Candidate",
    "Choice",
    "Mount",
    "agent_cgroup_name",
    "choose",
    "parse_mountinfo",
    "parse_proc_cgroup",
    "task_cgroup_name",
]
