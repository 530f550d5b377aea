"""``agora job submit``: a command, a service job (``--service CMD --inputs FILE``) or the jobs of a
TOML job file (``frameworks/batch/jobfile.py``), sent to the batch service in one request."""

from __future__ import annotations

import os
from typing import Any, TextIO

import click

from frameworks.batch import jobfile
from frameworks.cli.common import (
    emit,
    json_flag,
)
from frameworks.cli.job_api import (
    API,
)


def _pairs(values: tuple[str, ...], what: str) -> dict[str, str]:
    out = {}
    for v in values:
        if "=" not in v:
            raise click.BadParameter(f"{what} must look like NAME=VALUE, got {v!r}")
        k, _, val = v.partition("=")
        out[k] = val
    return out


@click.command(context_settings={"ignore_unknown_options": True})
@click.option("--name", default=None, help="Job name (default: the command).")
@click.option(
    "--count", "-n", default=1, show_default=True, type=click.IntRange(1), help="Tasks (a job array)."
)
@click.option(
    "--gang", default=0, show_default=True, type=click.IntRange(0),
    help="Tasks that must start together, all or none (0: no gang, each task starts on its own).",
)
@click.option("--cpus", default=1.0, show_default=True, type=float, help="CPUs per task (fractions allowed).")
@click.option("--mem", default=128.0, show_default=True, type=float, help="MB of memory per task.")
@click.option("--gpus", default=0.0, show_default=True, type=float, help="GPUs per task.")
@click.option("--disk", default=0.0, show_default=True, type=float, help="MB of disk per task.")
@click.option("--priority", default=0, show_default=True, type=int,
              help="Higher starts first (equal: the earlier job); may be negative.")
@click.option("--queue", default="*", show_default=True,
              help="Queue (the role offers come from); the batch framework refuses one it does not subscribe to.")
@click.option("--after", multiple=True, type=int, help="Run after this job succeeds (repeatable).")
@click.option("--after-any", multiple=True, type=int, help="Run after this job ends, however it ends.")
@click.option("--retries", default=0, show_default=True, type=click.IntRange(0), help="Retries per task (of a gang with abort/restart: restarts of the whole gang).")
@click.option("--time-limit", default=None, type=float, help="Seconds per task attempt (a gang with abort/restart: per run of the gang).")
@click.option("--env", multiple=True, help="NAME=VALUE (repeatable).")
@click.option("--constraint", multiple=True, help="Agent attribute NAME=VALUE (repeatable).")
@click.option("--ports", default=0, show_default=True, type=click.IntRange(0, 1000),
              help="Ports per task from its offer, exported as PORT0..PORT<K-1>.")
@click.option("--gang-policy", type=click.Choice(["abort", "restart", "continue"]), default=None,
              help="When a gang's task fails: abort (kill the others, fail the job; the default), restart "
                   "(the whole gang runs again, as one of --retries; the default with --retries) or continue "
                   "(the others run on, each task retried alone).")
@click.option("--after-notok", multiple=True, type=int,
              help="Run after this job fails or is cancelled (Slurm afternotok); cancelled if it succeeds.")
@click.option("--singleton", is_flag=True, help="Wait while an earlier job of the same name and user has not ended.")
@click.option("--preemptible", is_flag=True,
              help="May run on revocable resources, and be preempted (requeued) by a higher-priority --preempt job.")
@click.option("--preempt", is_flag=True,
              help="When it cannot fit, evict lower-priority --preemptible tasks of the same owner (requeued).")
@click.option("--grace", default=None, type=float, help="Seconds between SIGTERM and SIGKILL when a task is killed.")
@click.option("--schedule", default=None,
              help='Periodic: a cron expression in UTC ("*/5 * * * *"; 6 fields: seconds first); each run is a job.')
@click.option("--concurrency", default=None, type=click.Choice(["allow", "forbid", "replace"]),
              help="Periodic: a run falls due while the last one is live: start anyway, skip it, or replace it.")
@click.option("--notify", default=None, help="POST the job's final state (JSON) to this http(s) URL.")
@click.option("--file", "-f", "job_file", default=None, type=click.Path(dir_okay=False, exists=True),
              help="Submit the job(s) of a TOML job file (also: agora job submit FILE.toml).")
@click.option("--shell", "use_shell", is_flag=True, help="Run the command through /bin/sh -c.")
@click.option("--service", "service", default=None, metavar="CMD",
              help="A service job: CMD (run by /bin/sh -c) starts once per task (--count of them) and takes the "
                   "--inputs one line each on stdin, writing one result line each on stdout.")
@click.option("--inputs", "inputs_file", default=None, type=click.File("r"),
              help="With --service: one input (service task) per line; - reads stdin.")
@click.option("--window", default=None, type=click.IntRange(1, 100_000),
              help="With --service: service tasks in flight per instance (default 256).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
@json_flag
@click.pass_context
def submit(
    ctx: click.Context,
    name: str | None,
    count: int,
    gang: int,
    cpus: float,
    mem: float,
    gpus: float,
    disk: float,
    priority: int,
    queue: str,
    after: tuple[int, ...],
    after_any: tuple[int, ...],
    after_notok: tuple[int, ...],
    singleton: bool,
    retries: int,
    time_limit: float | None,
    env: tuple[str, ...],
    constraint: tuple[str, ...],
    preemptible: bool,
    ports: int,
    gang_policy: str | None,
    preempt: bool,
    grace: float | None,
    schedule: str | None,
    concurrency: str | None,
    notify: str | None,
    job_file: str | None,
    use_shell: bool,
    service: str | None,
    inputs_file: TextIO | None,
    window: int | None,
    command: tuple[str, ...],
) -> None:
    """Submit CMD [ARGS...] (put `--` before the command), or the jobs of a TOML job file
    (`agora job submit job.toml`: the same fields as these flags, several jobs as [[job]]
    tables, dependencies by name); prints the job id (a file: one `ID NAME` line per job)."""
    if job_file is None and len(command) == 1 and command[0].endswith(".toml") and os.path.isfile(command[0]):
        job_file = command[0]
        command = ()
    if job_file is not None:
        given = [
            p.opts[0] for p in ctx.command.params
            if p.name not in ("job_file", "command", "as_json")
            and ctx.get_parameter_source(p.name or "") is click.core.ParameterSource.COMMANDLINE
        ]
        if given or command:
            raise click.UsageError(
                f"a job file takes no command or flags ({', '.join(given) or ' '.join(command)}): put them in the file"
            )
        _submit_file(ctx, job_file)
        return
    if service is not None:
        if command or use_shell:
            raise click.UsageError("--service CMD is the command: give no other (nor --shell)")
        if inputs_file is None:
            raise click.UsageError("--service needs --inputs FILE (one input per line)")
        command, use_shell = (service,), True
    elif inputs_file is not None or window is not None:
        raise click.UsageError("--inputs and --window go with --service CMD")
    if not command:
        raise click.UsageError("give the command to run (after --), or a job file (job.toml)")
    body: dict[str, Any] = {
        "count": count,
        "gang": gang,
        "cpus": cpus,
        "mem": mem,
        "gpus": gpus,
        "disk": disk,
        "priority": priority,
        "queue": queue,
        "max_retries": retries,
        "env": _pairs(env, "--env"),
        "constraints": _pairs(constraint, "--constraint"),
        "after": [{"job_id": j, "kind": "success"} for j in after]
        + [{"job_id": j, "kind": "any"} for j in after_any]
        + [{"job_id": j, "kind": "notok"} for j in after_notok],
        "preemptible": preemptible,
        "preempt": preempt,
        "singleton": singleton,
    }
    for key, value in (("grace", grace), ("schedule", schedule), ("concurrency", concurrency), ("notify", notify)):
        if value is not None:
            body[key] = value
    if name:
        body["name"] = name
    if time_limit is not None:
        body["time_limit"] = time_limit
    if ports:
        body["ports"] = ports
    if gang_policy is not None:
        body["gang_policy"] = gang_policy
    if use_shell:
        body["shell"] = " ".join(command)
    else:
        body["argv"] = list(command)
    if inputs_file is not None:
        body["service"] = True
        body["inputs"] = inputs_file.read().splitlines()
        if window is not None:
            body["window"] = window
    result = API.post(ctx, "/jobs", body)
    emit(ctx, result, lambda r: click.echo(r["id"]))


def _submit_file(ctx: click.Context, path: str) -> None:
    """Validate the whole file here (errors name the line and the field), then submit all its
    jobs in one request: the service makes all of them or none."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        bodies = jobfile.parse(text, path)
    except (OSError, UnicodeDecodeError) as exc:
        raise click.ClickException(f"{path}: {exc}") from exc
    except jobfile.JobFileError as exc:
        raise click.ClickException(str(exc)) from exc
    result = API.post(ctx, "/jobs", {"jobs": bodies})

    def render(r: dict[str, Any]) -> None:
        if len(r["ids"]) == 1:
            click.echo(r["ids"][0])
        else:
            for j in r["jobs"]:
                click.echo(f"{j['id']} {j['name']}")

    emit(ctx, result, render)
