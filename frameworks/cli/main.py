"""`agora` — the command line entry point.

Subcommands live in their own modules and are named here in one explicit map (name -> "module:
attribute"), loaded only when invoked, so `agora --help` stays fast and no command registers
itself by import side effect.
"""

from __future__ import annotations

import importlib

import click

from protocol.version import AGORA_VERSION

COMMANDS: dict[str, tuple[str, str]] = {
    "up": ("frameworks.cli.up:up", "Start a local cluster (master, agents, batch and elastic frameworks)."),
    "agents": ("frameworks.cli.cluster:agents", "List the cluster's agents."),
    "agent": ("frameworks.cli.agent:agent", "Agents: list (states, drain reasons), show, drain, reactivate."),
    "maintenance": ("frameworks.cli.maintenance:maintenance",
                    "Maintenance schedules (Mesos): schedule machines, inverse-offer answers, down, up."),
    "config": ("frameworks.cli.config:config", "Show or set the CLI's settings (master, batch, elastic...)."),
    "task": ("frameworks.cli.task:task", "Tasks: list, show, logs [-f], attach, download, kill."),
    "frameworks": ("frameworks.cli.cluster:frameworks", "List registered frameworks."),
    "tasks": ("frameworks.cli.cluster:tasks", "List tasks."),
    "offers": ("frameworks.cli.cluster:offers", "List outstanding offers with holder and age."),
    "events": ("frameworks.cli.events:events", "Follow the cluster's events (agents, frameworks, tasks)."),
    "job": ("frameworks.cli.job:job", "Submit and manage batch jobs."),
    "share": ("frameworks.cli.share:share", "Each user's fair share of the batch queues (like sshare)."),
    "elastic": ("frameworks.cli.elastic:elastic", "Submit and manage elastic training jobs."),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        target, _ = entry
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            raise click.ClickException(f"'agora {cmd_name}' is not available: {exc}") from exc
        command = getattr(module, attr)
        if not isinstance(command, click.Command):
            raise click.ClickException(f"{target} is not a click command")
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, help_text) for name, (_, help_text) in sorted(COMMANDS.items())]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup)
@click.version_option(AGORA_VERSION, prog_name="agora", message="%(prog)s %(version)s")
@click.option(
    "--ca", envvar="AGORA_CA", default=None, type=click.Path(dir_okay=False),
    help="The cluster CA (PEM) for https:// masters and services (or AGORA_CA); host:port then means https.",
)
@click.option(
    "--token", envvar="AGORA_TOKEN", default=None,
    help="A bearer token sent to the master and the framework services (or AGORA_TOKEN) when they authenticate.",
)
@click.option("--principal", envvar="AGORA_PRINCIPAL", default=None,
              help="Or a principal (AGORA_PRINCIPAL) sent with --secret as HTTP Basic.")
@click.option("--secret", envvar="AGORA_SECRET", default=None, help="The principal's secret (or AGORA_SECRET).")
def cli(ca: str | None, token: str | None, principal: str | None, secret: str | None) -> None:
    """Agora: an offer-based cluster resource manager (batch and elastic deep-learning jobs)."""
    from frameworks.cli.common import set_basic, set_ca, set_token

    if (principal is None) != (secret is None):
        raise click.UsageError("--principal and --secret go together (AGORA_PRINCIPAL / AGORA_SECRET count too)")
    set_ca(ca)
    set_token(token)
    set_basic(principal, secret)


def main() -> None:
    cli()


if __name__ == "__main__":  # python -m frameworks.cli.main
    main()
