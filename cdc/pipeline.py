"""``cdc run -c FILE``: the capture and every connector, each in its own process.

``cdc run`` checks the pipeline file, then supervises ``cdc capture``, one
``cdc connect --connector NAME`` per connector and, with a ``reconcile:`` section,
``cdc reconcile --continuous`` as child processes (``cdc.supervisor``):
they share no interpreter lock, so a busy connector does not slow the capture. A child
that exits is started again with backoff; one that exits with a configuration error or
an error a restart cannot fix (a lost or missing slot without ``--recreate-lost-slot``) stops the
pipeline with that error. SIGTERM or Ctrl-C stops every child cleanly: the capture
flushes and acknowledges what is durable, each connector finishes its batch, flushes its
sink and commits its offsets. With a ``metrics:`` section, ``/metrics``, ``/healthz`` and
the status page of the whole pipeline are served on ``metrics.port``.
"""

from __future__ import annotations

import logging
import sys
import tempfile
from pathlib import Path

import click

from cdc.capture.commands import recreate_lost_slot_option
from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import DistributaryError
from cdc.log.open import check_backend
from cdc.logsetup import configure_logging, current_log_format, protect_secrets
from cdc.memory import release_free_memory_periodically
from cdc.signals import stop_on_signals

log = logging.getLogger(__name__)


@click.command()
@config_option
@recreate_lost_slot_option
def run(config_path: Path, recreate_lost_slot: bool) -> None:
    """Capture changes into the log and feed every configured connector."""
    from cdc.supervisor import (
        ChildEndpoints,
        ChildProcess,
        ChildSpec,
        PipelineEndpoint,
        PipelineView,
        Supervisor,
        child_specs,
    )

    configure_logging()
    config = load_config_or_exit(config_path)
    protect_secrets(config)
    stop = stop_on_signals()
    release_free_memory_periodically()  # a long run's fragmented heap
    names = [connector.name for connector in config.connectors]
    every = config.spark.columnar_every
    lakehouse = config.spark.lakehouse_every
    master = config.spark.master
    specs = child_specs(config_path.absolute(), names, recreate_lost_slot=recreate_lost_slot,
                        reconcile=config.reconcile is not None,
                        columnar_every=None if every is None else every.total_seconds(),
                        lakehouse_every=None if lakehouse is None else lakehouse.total_seconds(),
                        # beside the capture: one core, unless the jobs run on a cluster
                        lakehouse_master="local[1]" if master.startswith("local") else master)
    log_format = current_log_format()
    with tempfile.TemporaryDirectory(prefix="distributary-run-") as scratch:
        port_files = {spec.name: Path(scratch) / f"child-{number}.port"
                      for number, spec in enumerate(specs)}

        def launch(spec: ChildSpec) -> ChildProcess:
            port_file = None if config.metrics is None or not spec.serves_endpoint \
                else port_files[spec.name]
            return ChildProcess(spec, log_format, port_file)

        supervisor = Supervisor(specs, launch)
        endpoint = None
        try:
            check_backend(config.log)
            if config.metrics is not None:
                token = config.metrics.token
                view = PipelineView(supervisor.states, ChildEndpoints(
                    None if token is None else token.get_secret_value()), names)
                endpoint = PipelineEndpoint(config.metrics, view)
                endpoint.start()
            failed = supervisor.run(stop)
        except DistributaryError as exc:
            raise click.ClickException(str(exc)) from None
        finally:
            if endpoint is not None:
                endpoint.stop()
    if failed is not None:  # status 2 or 3: what the child exited with
        click.echo(f"Error: {failed.name} {failed.describe()}", err=True)
        sys.exit(failed.status)
