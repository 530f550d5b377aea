"""Job files: batch jobs written as TOML, with the same fields as ``agora job submit``'s flags.

One job is a file of top-level keys; several are ``[[job]]`` tables, and a job may depend on
another of the same file by its name::

    [[job]]
    name = "prep"
    command = ["python", "prep.py"]     # run without a shell (or: shell = "make data")
    cpus = 0.5

    [[job]]
    name = "train"
    shell = "python train.py --fold $AGORA_TASK_INDEX"
    count = 4
    gang = 4
    after = ["prep"]                    # a job of this file by name, or a job id
    env = { EPOCHS = "10" }

Every error names the file, the line and the field (``job.toml:12: cpus: expected a number,
got 'two'``); a file with an error submits nothing. ``to_toml`` writes a submitted job back as a
file that submits the same job again (``agora job show --toml``).

Python's ``tomllib`` parses the file; it reports lines only for syntax errors, so the line of
each key is found by a scan of the text that follows TOML's table headers.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from typing import Any

from frameworks.batch.model import SpecError, spec_from_dict

__pure__ = True

# file key -> API field; the file uses the flags' names
RENAMED = {"command": "argv", "retries": "max_retries", "constraint": "constraints"}
API_NAMES = {"argv": "command", "max_retries": "retries", "constraints": "constraint"}
DEPENDENCY_KEYS = {"after": "success", "after_any": "any", "after_notok": "notok"}
KEYS = frozenset(
    {"name", "command", "shell", "count", "gang", "cpus", "mem", "gpus", "disk", "priority", "queue",
     "retries", "time_limit", "grace", "env", "constraint", "constraints", "preemptible", "preempt",
     "singleton", "schedule", "concurrency", "notify", "ports", "gang_policy", *DEPENDENCY_KEYS}
)  # fmt: skip
ORDER = ("name", "command", "shell", "count", "gang", "gang_policy", "cpus", "mem", "gpus", "disk", "ports", "queue", "priority",
         "retries", "time_limit", "grace", "preemptible", "preempt", "singleton", "schedule", "concurrency",
         "notify", "after", "after_any", "after_notok", "env", "constraint")  # fmt: skip


class JobFileError(ValueError):
    """A job file that cannot be submitted: ``path:line: field: what``."""


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"""^\s*("[^"]*"|'[^']*'|[A-Za-z0-9_-]+)\s*(\.|=)""")


def key_lines(text: str) -> dict[tuple[int | None, str], int]:
    """``(job, key) -> line`` (1-based) of every top-level key (job None) and every key of the
    n-th ``[[job]]`` table (job n, 0-based); a sub-table (``[job.env]``) counts as its key."""
    out: dict[tuple[int | None, str], int] = {}
    job: int | None = None
    jobs = -1
    table: str | None = None  # a sub-table's key ("env"), whose own keys are not the job's
    in_string: str | None = None
    for n, line in enumerate(text.splitlines(), start=1):
        if in_string is not None:
            if line.count(in_string) % 2 == 1:
                in_string = None
            continue
        for quote in ('"""', "'''"):
            if line.count(quote) % 2 == 1:
                in_string = quote
        if in_string is not None and _KEY.match(line) is None:
            continue
        m = _HEADER.match(line)
        if m is not None:
            parts = [p.strip().strip("\"'") for p in m.group(2).split(".")]
            if m.group(1) == "[[" and parts == ["job"]:
                jobs += 1
                job, table = jobs, None
                out.setdefault((job, ""), n)
            elif parts[0] == "job" and len(parts) >= 2 and jobs >= 0:
                job, table = jobs, parts[1]
                out.setdefault((job, parts[1]), n)
            else:
                job, table = None, parts[0]
                out.setdefault((None, parts[0]), n)
            continue
        k = _KEY.match(line)
        if k is not None and table is None:
            out.setdefault((job, k.group(1).strip("\"'")), n)
    return out


def parse(text: str, path: str = "job.toml") -> list[dict[str, Any]]:
    """The API bodies of the file's jobs, in an order where each job comes after the jobs of
    the file it depends on (``after`` entries ``{"name": N}`` for those, ``{"job_id": I}`` for
    submitted jobs). Raises ``JobFileError``."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        where = m.group(1) if m else "1"
        raise JobFileError(f"{path}:{where}: not valid TOML: {re.sub(r' [(]at line.*', '', msg)}") from exc
    lines = key_lines(text)

    def fail(job: int | None, key: str | None, msg: str) -> JobFileError:
        line = lines.get((job, key or ""), lines.get((job, ""), 1)) if key else lines.get((job, ""), 1)
        return JobFileError(f"{path}:{line}: {msg}")

    if "job" in doc:
        raw = doc["job"]
        if not isinstance(raw, list) or not all(isinstance(j, dict) for j in raw):
            raise fail(None, "job", "job: write each job as a [[job]] table")
        extra = sorted(set(doc) - {"job"})
        if extra:
            raise fail(None, extra[0], f"{extra[0]}: with [[job]] tables, every field goes inside one")
        entries: list[tuple[int | None, dict[str, Any]]] = list(enumerate(raw))
    else:
        if not doc:
            raise JobFileError(f"{path}:1: the file has no job")
        entries = [(None, doc)]
    bodies: list[dict[str, Any]] = []
    names: dict[str, int] = {}
    for job, d in entries:
        body = _body(d, job, fail)
        name = body.get("name")
        if isinstance(name, str):
            if name in names:
                raise fail(job, "name", f"name: {name!r} is the name of another job of the file")
            names[name] = len(bodies)
        bodies.append(body)
    # dependencies by name: the named job must be in the file; submit in dependency order
    deps: list[list[int]] = []
    for n, (job, _) in enumerate(entries):
        mine = []
        for dep in bodies[n]["after"]:
            if "name" in dep:
                k = names.get(dep["name"])
                if k is None:
                    key = API_NAMES.get("after", "after") if dep["kind"] == "success" else f"after_{dep['kind']}"
                    raise fail(job, key, f"{key}: no job named {dep['name']!r} in the file (a number is a job id)")
                if k == n:
                    raise fail(job, "after", f"after: job {dep['name']!r} depends on itself")
                mine.append(k)
        deps.append(mine)
    order = _topological(deps, [b.get("name", str(i)) for i, b in enumerate(bodies)], path)
    return [bodies[i] for i in order]


def _body(d: Mapping[str, Any], job: int | None, fail: Any) -> dict[str, Any]:
    unknown = sorted(set(d) - KEYS)
    if unknown:
        raise fail(job, unknown[0], f"{unknown[0]}: unknown field (fields: {', '.join(ORDER)})")
    body: dict[str, Any] = {}
    after: list[dict[str, Any]] = []
    for key, value in d.items():
        if key in DEPENDENCY_KEYS:
            items = value if isinstance(value, list) else [value]
            for item in items:
                if isinstance(item, bool) or not isinstance(item, int | str):
                    raise fail(job, key, f"{key}: expected job names (of this file) or job ids, got {item!r}")
                kind = DEPENDENCY_KEYS[key]
                after.append({"job_id": item, "kind": kind} if isinstance(item, int) else {"name": item, "kind": kind})
            continue
        if key == "command" and isinstance(value, str):
            raise fail(job, key, 'command: expected a list of strings (["prog", "arg"]); for a shell line use shell = "..."')
        if key == "time_limit" and isinstance(value, str):
            value = _duration(value, job, fail)
        body[RENAMED.get(key, key)] = value
    body["after"] = after
    # validate as the service will (names of the file stand in as job id 0 here)
    probe = dict(body)
    probe["after"] = [{"job_id": a.get("job_id", 0), "kind": a["kind"]} for a in after]
    try:
        spec_from_dict(probe)
    except SpecError as exc:
        msg = str(exc)
        if msg.startswith("give exactly one of argv"):
            msg = 'command: give exactly one of command = ["prog", "arg"] (no shell) or shell = "..."'
        field = msg.split(":", 1)[0].split("[", 1)[0] if ":" in msg else ""
        where: str | None = API_NAMES.get(field, field) if field else None
        if where and where != field:
            msg = where + msg[len(field) :]
        if where == "constraint" and "constraints" in d:
            where = "constraints"
        if where is not None and where not in d:
            where = None  # a default or a missing field: the job's first line
        raise fail(job, where, msg) from exc
    return body


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _duration(text: str, job: int | None, fail: Any) -> float:
    """``"90s"``, ``"10m"``, ``"1h30m"``, ``"2d"``, or plain seconds."""
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        return float(t)
    parts = re.findall(r"(\d+(?:\.\d+)?)([smhd])", t)
    if not parts or "".join(a + b for a, b in parts) != t:
        raise fail(job, "time_limit", f"time_limit: {text!r} is not a duration (seconds, or like 90s, 10m, 1h30m)")
    return sum(float(a) * _UNITS[b] for a, b in parts)


def _topological(deps: list[list[int]], names: list[str], path: str) -> list[int]:
    order: list[int] = []
    state = [0] * len(deps)  # 0 new, 1 visiting, 2 done

    def visit(i: int, chain: list[int]) -> None:
        if state[i] == 2:
            return
        if state[i] == 1:
            cycle = " -> ".join(names[j] for j in [*chain[chain.index(i) :], i])
            raise JobFileError(f"{path}: dependency cycle: {cycle}")
        state[i] = 1
        for j in deps[i]:
            visit(j, [*chain, i])
        state[i] = 2
        order.append(i)

    for i in range(len(deps)):
        visit(i, [])
    return order


# --- writing -------------------------------------------------------------------------------------


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isfinite(v) and v == int(v) and abs(v) < 1e15:
            return f"{int(v)}.0"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + " }" if v else "{}"
    raise TypeError(f"cannot write {v!r} as TOML")


def _key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else json.dumps(k)


def to_toml(spec: Mapping[str, Any], comment: str | None = None) -> str:
    """A job file for the API form of a spec (``model.spec_to_dict``): submitting it makes the
    same job (dependencies by job id)."""
    out: dict[str, Any] = {}
    for api_key, v in spec.items():
        if api_key == "after":
            continue
        out[API_NAMES.get(api_key, api_key)] = v
    for dep in spec.get("after") or ():
        key = {"success": "after", "any": "after_any", "notok": "after_notok"}[dep["kind"]]
        out.setdefault(key, []).append(dep["job_id"])
    lines = [f"# {comment}"] if comment else []
    for key in ORDER:
        if key not in out:
            continue
        v = out[key]
        if key in ("env", "constraint") and not v:
            continue
        lines.append(f"{key} = {_value(v)}")
    return "\n".join(lines) + "\n"
