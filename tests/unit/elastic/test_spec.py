from __future__ import annotations

import pytest

from frameworks.elastic.spec import SpecError, from_flags, from_mapping, parse_toml, to_mapping

GOOD = """
name = "digits"
role = "ml"
priority = 2

[worker]
command = "python -m frameworks.elastic.examples.digits worker --batch 32"
cpus = 1
mem = 256
env = { OMP_NUM_THREADS = "1" }

[scaling]
min_workers = 2
max_workers = 6

[data]
dataset = "digits"
num_shards = 32
epochs = 5

[checkpoint]
dir = "/tmp/ck"
interval = 10
"""


def test_parse_good_spec_with_defaults() -> None:
    s = parse_toml(GOOD)
    assert s.name == "digits" and s.role == "ml" and s.priority == 2
    assert s.worker.command[-2:] == ("--batch", "32")
    assert s.worker.cpus == 1.0 and s.worker.gpus == 0.0 and s.worker.env == {"OMP_NUM_THREADS": "1"}
    assert (s.scaling.min_workers, s.scaling.max_workers, s.scaling.revocable_ok) == (2, 6, True)
    assert s.data.num_shards == 32 and s.checkpoint.interval == 10.0
    assert s.optimizer.kind == "momentum"


def test_round_trip_through_mapping() -> None:
    s = parse_toml(GOOD)
    assert from_mapping(to_mapping(s)) == s


@pytest.mark.parametrize(
    ("mutate", "field", "fragment"),
    [
        (
            lambda t: t.replace("max_workers = 6", "max_workers = 1"),
            "scaling.max_workers",
            "at least min_workers",
        ),
        (lambda t: t.replace("min_workers = 2", "min_workers = 0"), "scaling.min_workers", "at least 1"),
        (lambda t: t.replace("max_workers = 6", 'max_workers = "many"'), "scaling.max_workers", "integer"),
        (lambda t: t.replace("cpus = 1", "cpus = -1"), "worker.cpus", "positive"),
        (lambda t: t.replace("epochs = 5", "epoch = 5"), "data.epoch", "did you mean 'epochs'"),
        (lambda t: t.replace("[scaling]", "[scalin]"), "scalin", "did you mean 'scaling'"),
        (lambda t: t.replace('name = "digits"', ""), "name", "missing"),
        (lambda t: t.replace("interval = 10", "interval = 0"), "checkpoint.interval", "positive"),
        (lambda t: t + "\n[optimizer]\nkind = 'adam'\n", "optimizer.kind", "one of"),
        (lambda t: t.replace('command = "python', 'command = "\\"python'), "worker.command", "split"),
    ],
)
def test_bad_specs_name_the_field(mutate: object, field: str, fragment: str) -> None:
    with pytest.raises(SpecError) as e:
        parse_toml(mutate(GOOD))  # type: ignore[operator]
    assert e.value.field == field
    assert fragment in str(e.value)


def test_missing_section_and_bad_toml() -> None:
    with pytest.raises(SpecError, match="scaling: missing section"):
        parse_toml('name = "x"\n[worker]\ncommand = "true"\n')
    with pytest.raises(SpecError, match="invalid TOML"):
        parse_toml("name = ")


def test_flags_dotted_bare_and_errors() -> None:
    s = from_flags(
        {
            "name": "j",
            "command": "train.py",
            "min_workers": "1",
            "scaling.max_workers": "4",
            "revocable_ok": "no",
        }
    )
    assert s.scaling.max_workers == 4 and s.scaling.revocable_ok is False
    assert s.worker.command == ("train.py",)
    with pytest.raises(SpecError, match="did you mean 'max_workers'"):
        from_flags({"maxworkers": "3"})
    over = from_flags({"max_workers": "9"}, base=to_mapping(s))
    assert over.scaling.max_workers == 9 and over.name == "j"
