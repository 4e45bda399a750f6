"""``kshim delays``: the delayed-delivery status of a broker's data directory (pending
records per topic, next due, lateness), or its pending records exported to a Kafka cluster
for gateways (kshim/cli/delays_export.py)."""

from __future__ import annotations

import argparse
import os

from kshim.broker.clock import wall_clock_ms
from kshim.broker.delay.status import delay_status
from kshim.cli.admin_options import Commands, add_command, command_security
from kshim.cli.config_sources import DEFAULT_DATA_DIR
from kshim.cli.errors import DELAYS_PROGRAM, CommandFailed, print_lines
from kshim.cli.status_tables import delays_table
from kshim.cli.text_table import json_or_table
from kshim.storage.meta.lmdb_types import LmdbFailed
from kshim.storage.schedule.delay_records import ScheduleLayoutError
from kshim.storage.schedule.delay_store import DelayStore


def add_delays_parser(commands: Commands) -> None:
    delays_help = "delayed delivery: pending records per topic, next due, lateness"
    delays = add_command(commands, "delays", delays_help, DELAYS_PROGRAM)
    delays.add_argument(
        "--data-dir", default=DEFAULT_DATA_DIR, help=f"the broker's (default {DEFAULT_DATA_DIR})"
    )
    delays.add_argument("--json", action="store_true", help="one JSON object per topic")
    delays.add_argument(
        "--export-to",
        metavar="BOOTSTRAP",
        help="produce the stopped broker's pending delayed records to T.delay at this Kafka "
        "cluster (or gateway), each due when it was due here, for gateways given --delay "
        "(docs/gateway.md, Moving to a Kafka cluster)",
    )
    delays.add_argument(
        "--export-config",
        metavar="FILE",
        help="with --export-to: a Kafka client properties file (security.protocol, TLS, SASL)",
    )


def show_delays(arguments: argparse.Namespace) -> None:
    """Prints the delayed-delivery status of the broker whose data directory is given (read
    from the directory while the broker runs, or after it stopped); raises CommandFailed
    when that is no kshim data directory."""
    data_dir = arguments.data_dir
    if not os.path.isdir(os.path.join(data_dir, "meta")):
        raise CommandFailed(f"{data_dir} is not a kshim data directory (no meta/ in it)")
    if arguments.export_to:
        export_pending(data_dir, arguments.export_to, arguments.export_config)
        return
    store = DelayStore(os.path.join(data_dir, "delays"), readonly=True)
    try:
        rows = delay_status(store.summary(), wall_clock_ms())
    except (LmdbFailed, OSError, ScheduleLayoutError) as error:
        raise CommandFailed(f"cannot read the delay schedule in {data_dir}: {error}") from error
    finally:
        store.close()
    for line in json_or_table(rows, arguments.json, delays_table):
        print_lines(line)


def export_pending(data_dir: str, bootstrap: str, config: str | None) -> None:
    """``kshim delays --export-to``: kshim/cli/delays_export.py."""
    # Imported only when asked for: aiokafka.
    from kshim.cli.delays_export import export_delays, pending_records

    security = command_security(config)
    try:
        records = pending_records(data_dir)
    except (LmdbFailed, OSError, ScheduleLayoutError) as error:
        raise CommandFailed(f"cannot read the delay schedule in {data_dir}: {error}") from error
    try:
        count = export_delays(records, bootstrap, security)
    except Exception as error:  # aiokafka's: the cluster refused or did not answer
        raise CommandFailed(f"cannot export to {bootstrap}: {error}") from error
    print(f"exported {count} pending delayed records to {bootstrap}", flush=True)
