"""`rebound-worker module:worker`: runs a `rebound.Worker` until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from rebound.errors import ReboundError
from rebound.worker import Worker


def load(spec: str) -> Worker:
    """The `Worker` named by `module:attribute` (the module found from the
    current directory too, as `python -m` would)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise SystemExit(f"rebound-worker: expected MODULE:ATTRIBUTE (e.g. app.jobs:worker), got {spec!r}")
    if "" not in sys.path:
        sys.path.insert(0, "")
    module = importlib.import_module(module_name)
    worker = getattr(module, attribute, None)
    if not isinstance(worker, Worker):
        found = "missing" if worker is None else f"of type {type(worker).__name__}"
        raise SystemExit(f"rebound-worker: {spec} is {found}, not a rebound.Worker")
    return worker


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="rebound-worker",
        description="Run a rebound.Worker until SIGTERM or SIGINT, then stop gracefully.",
        epilog="Connection settings the worker leaves out come from REBOUND_SERVER, REBOUND_USER, "
        "REBOUND_PASSWORD, REBOUND_CA_CERT, REBOUND_CLIENT_CERT and REBOUND_CLIENT_KEY.",
    )
    parser.add_argument("worker", metavar="MODULE:ATTRIBUTE", help="where the Worker is, e.g. app.jobs:worker")
    parser.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    worker = load(args.worker)
    try:
        worker.run()
    except ReboundError as e:
        raise SystemExit(f"rebound-worker: {e}") from None


if __name__ == "__main__":
    main()
