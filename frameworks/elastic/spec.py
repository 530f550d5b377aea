"""Elastic job specification: parsed from TOML (``tomllib``) or from flat ``key=value`` flags,
validated into a frozen ``JobSpec``. Bad input gives a ``SpecError`` naming the field.

TOML layout (every section optional except ``[worker]`` and ``[scaling]``)::

    name = "digits"
    role = "ml"          # allocation role (default "*")
    priority = 0         # higher wins capacity from lower

    [worker]
    command = "python -m frameworks.elastic.examples.digits worker"
    cpus = 1.0
    mem = 256            # MB
    gpus = 0
    env = { OMP_NUM_THREADS = "1" }

    [scaling]
    min_workers = 1
    max_workers = 4
    revocable_ok = true  # workers beyond the minimum may run on revocable resources

    [data]
    dataset = "digits"
    num_shards = 32
    epochs = 10

    [checkpoint]
    dir = "/var/lib/agora/elastic/digits"
    interval = 30.0      # seconds

    [optimizer]
    kind = "momentum"    # or "sgd"
    learning_rate = 0.1
    momentum = 0.9

Flags use dotted keys (``scaling.max_workers=8``) or the bare field name when it is unique
(``max_workers=8``).
"""

from __future__ import annotations

import difflib
import shlex
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs

__pure__ = True


class SpecError(ValueError):
    """An invalid job spec; ``field`` is the dotted key at fault."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


@attrs.frozen
class WorkerSpec:
    command: tuple[str, ...]
    cpus: float = 1.0
    mem: float = 256.0
    gpus: float = 0.0
    env: dict[str, str] = attrs.field(factory=dict)


@attrs.frozen
class ScalingSpec:
    min_workers: int
    max_workers: int
    revocable_ok: bool = True


@attrs.frozen
class DataSpec:
    dataset: str = ""
    num_shards: int = 16
    epochs: int = 1


@attrs.frozen
class CheckpointSpec:
    dir: str = ""
    interval: float = 30.0


@attrs.frozen
class OptimizerSpec:
    kind: str = "momentum"
    learning_rate: float = 0.1
    momentum: float = 0.9


@attrs.frozen
class JobSpec:
    name: str
    worker: WorkerSpec
    scaling: ScalingSpec
    data: DataSpec = DataSpec()
    checkpoint: CheckpointSpec = CheckpointSpec()
    optimizer: OptimizerSpec = OptimizerSpec()
    role: str = "*"
    priority: int = 0


# field name -> (type, default or _REQUIRED) per section; the top level is section "".
_REQUIRED = object()
_SCHEMA: dict[str, dict[str, tuple[type, Any]]] = {
    "": {"name": (str, _REQUIRED), "role": (str, "*"), "priority": (int, 0)},
    "worker": {
        "command": (str, _REQUIRED),
        "cpus": (float, 1.0),
        "mem": (float, 256.0),
        "gpus": (float, 0.0),
        "env": (dict, {}),
    },
    "scaling": {
        "min_workers": (int, _REQUIRED),
        "max_workers": (int, _REQUIRED),
        "revocable_ok": (bool, True),
    },
    "data": {"dataset": (str, ""), "num_shards": (int, 16), "epochs": (int, 1)},
    "checkpoint": {"dir": (str, ""), "interval": (float, 30.0)},
    "optimizer": {"kind": (str, "momentum"), "learning_rate": (float, 0.1), "momentum": (float, 0.9)},
}
_REQUIRED_SECTIONS = ("worker", "scaling")
OPTIMIZERS = ("sgd", "momentum")


def _suggest(word: str, options: list[str]) -> str:
    close = difflib.get_close_matches(word, options, n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


def _coerce(path: str, kind: type, value: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "yes", "1", "false", "no", "0"):
            return value.lower() in ("true", "yes", "1")
        raise SpecError(path, f"expected true or false, got {value!r}")
    if kind is int:
        if isinstance(value, bool):
            raise SpecError(path, f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str):
            try:
                return int(value)
            except ValueError:
                pass
        raise SpecError(path, f"expected an integer, got {value!r}")
    if kind is float:
        if isinstance(value, bool):
            raise SpecError(path, f"expected a number, got {value!r}")
        if isinstance(value, int | float):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value)
            except ValueError:
                pass
        raise SpecError(path, f"expected a number, got {value!r}")
    if kind is dict:
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise SpecError(path, "expected a table of string values")
        return dict(value)
    if not isinstance(value, str):
        raise SpecError(path, f"expected a string, got {value!r}")
    return value


def from_mapping(doc: Mapping[str, Any]) -> JobSpec:
    """Validate a nested mapping (as ``tomllib`` returns) into a ``JobSpec``."""
    sections = [s for s in _SCHEMA if s]
    for key, value in doc.items():
        if key in _SCHEMA[""]:
            continue
        if key not in sections:
            raise SpecError(key, "unknown key" + _suggest(key, sections + list(_SCHEMA[""])))
        if not isinstance(value, Mapping):
            raise SpecError(key, "expected a table")
    for section in _REQUIRED_SECTIONS:
        if section not in doc:
            raise SpecError(section, "missing section")
    values: dict[str, dict[str, Any]] = {}
    for section, fields in _SCHEMA.items():
        given: Mapping[str, Any] = (
            {k: v for k, v in doc.items() if k in fields} if section == "" else doc.get(section, {})
        )
        for key in given:
            if key not in fields:
                raise SpecError(f"{section}.{key}", "unknown key" + _suggest(key, list(fields)))
        out: dict[str, Any] = {}
        for key, (kind, default) in fields.items():
            path = f"{section}.{key}" if section else key
            if key in given:
                out[key] = _coerce(path, kind, given[key])
            elif default is _REQUIRED:
                raise SpecError(path, "missing required key")
            else:
                out[key] = default
        values[section] = out
    return _build(values)


def _build(v: dict[str, dict[str, Any]]) -> JobSpec:
    top, w, s, d, c, o = v[""], v["worker"], v["scaling"], v["data"], v["checkpoint"], v["optimizer"]
    if not top["name"].strip():
        raise SpecError("name", "must not be empty")
    try:
        command = tuple(shlex.split(w["command"]))
    except ValueError as e:
        raise SpecError("worker.command", f"cannot split into arguments: {e}") from None
    if not command:
        raise SpecError("worker.command", "must not be empty")
    for key in ("cpus", "mem"):
        if w[key] <= 0:
            raise SpecError(f"worker.{key}", f"must be positive, got {w[key]}")
    if w["gpus"] < 0:
        raise SpecError("worker.gpus", f"must not be negative, got {w['gpus']}")
    if s["min_workers"] < 1:
        raise SpecError("scaling.min_workers", f"must be at least 1, got {s['min_workers']}")
    if s["max_workers"] < s["min_workers"]:
        raise SpecError(
            "scaling.max_workers",
            f"must be at least min_workers ({s['min_workers']}), got {s['max_workers']}",
        )
    if d["num_shards"] < 1:
        raise SpecError("data.num_shards", f"must be at least 1, got {d['num_shards']}")
    if d["epochs"] < 1:
        raise SpecError("data.epochs", f"must be at least 1, got {d['epochs']}")
    if c["interval"] <= 0:
        raise SpecError("checkpoint.interval", f"must be positive, got {c['interval']}")
    if o["kind"] not in OPTIMIZERS:
        raise SpecError("optimizer.kind", f"must be one of {', '.join(OPTIMIZERS)}, got {o['kind']!r}")
    if o["learning_rate"] <= 0:
        raise SpecError("optimizer.learning_rate", f"must be positive, got {o['learning_rate']}")
    if not 0 <= o["momentum"] < 1:
        raise SpecError("optimizer.momentum", f"must be in [0, 1), got {o['momentum']}")
    return JobSpec(
        name=top["name"],
        role=top["role"],
        priority=top["priority"],
        worker=WorkerSpec(command=command, cpus=w["cpus"], mem=w["mem"], gpus=w["gpus"], env=w["env"]),
        scaling=ScalingSpec(**s),
        data=DataSpec(**d),
        checkpoint=CheckpointSpec(**c),
        optimizer=OptimizerSpec(**o),
    )


def parse_toml(text: str) -> JobSpec:
    """Parse and validate a TOML job spec."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise SpecError("", f"invalid TOML: {e}") from None
    return from_mapping(doc)


def from_flags(flags: Mapping[str, str], base: Mapping[str, Any] | None = None) -> JobSpec:
    """Build a spec from ``key=value`` flags (dotted or unique bare keys), over an optional base doc."""
    doc: dict[str, Any] = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in (base or {}).items()}
    owners: dict[str, list[str]] = {}
    for section, fields in _SCHEMA.items():
        for key in fields:
            owners.setdefault(key, []).append(section)
    for raw, value in flags.items():
        if "." in raw:
            section, _, key = raw.partition(".")
        else:
            found = owners.get(raw)
            if not found:
                raise SpecError(raw, "unknown flag" + _suggest(raw, list(owners)))
            if len(found) > 1:
                raise SpecError(raw, f"ambiguous flag, use one of {', '.join(f'{s}.{raw}' for s in found)}")
            section, key = found[0], raw
        if section == "":
            doc[key] = value
        else:
            if section not in _SCHEMA:
                raise SpecError(raw, "unknown section" + _suggest(section, list(_SCHEMA)))
            doc.setdefault(section, {})[key] = value
    return from_mapping(doc)


def to_mapping(spec: JobSpec) -> dict[str, Any]:
    """The nested-mapping form of a spec (``from_mapping(to_mapping(s)) == s``)."""
    return {
        "name": spec.name,
        "role": spec.role,
        "priority": spec.priority,
        "worker": {
            "command": shlex.join(spec.worker.command),
            "cpus": spec.worker.cpus,
            "mem": spec.worker.mem,
            "gpus": spec.worker.gpus,
            "env": dict(spec.worker.env),
        },
        "scaling": attrs.asdict(spec.scaling),
        "data": attrs.asdict(spec.data),
        "checkpoint": attrs.asdict(spec.checkpoint),
        "optimizer": attrs.asdict(spec.optimizer),
    }
