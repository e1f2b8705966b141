"""The code server of `airwave serve`: Dagster's gRPC API server with warm run workers.

Dagster 1.13's code server starts every run worker with `multiprocessing.get_context("spawn")`
(`DagsterApiServer.__init__`, `dagster/_grpc/server.py`): a fresh interpreter per run that imports
Dagster and loads the code location before the run's first event, about 2-3 s of a run's start
on this project's 2-core machine (docs/dagster-notes.md Q10). Neither `dagster api grpc` nor
`dagster code-server start` offers another start method, so this entry point builds the same
server (`DagsterApiServer` behind `DagsterGrpcServer`, as `dagster api grpc` does) with one
difference: run workers are forked from a forkserver that imported the code location once, at the
server's start (`run_worker_preload`). Everything else a run worker does is Dagster's: the same
`start_run_in_subprocess`, event queue, termination event and `GetCurrentRuns` bookkeeping.

A run worker is still its own process, forked from a process that never ran a thread or opened a
connection (the forkserver only imports modules), so crash, cancel and run-monitoring semantics
are those of a spawned worker: killing it kills only its run, its pid is in the event log, and it
opens its own instance. The forkserver starts in the background when the server starts, so the
server answers at once and the first run rarely waits for it; a run that starts before the
preload ends waits for it instead of importing the location itself.

Like `dagster code-server start`, a code location that fails to load does not stop the server: it
reports the error to the webserver (`lazy_load_user_code`). Unlike it, the server does not restart
itself to reload code: `airwave serve` restarts the process (and so the forkserver) instead.

Usage: `python -m airwave_dagster.code_server -h HOST -p PORT [-m MODULE -a ATTRIBUTE]
[--location-name NAME]`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
import time
from collections.abc import Sequence
from multiprocessing import forkserver, popen_forkserver
from multiprocessing.connection import wait
from multiprocessing.context import ForkServerContext, ForkServerProcess
from typing import Any

from airwave_dagster.durability.run_launcher import process_alive

_LOST_FORKSERVER_POLL_SECONDS = 0.5

DEFAULT_MODULE = "airwave_dagster.definitions"
DEFAULT_ATTRIBUTE = "defs"

RUN_WORKER_EXTRA_PRELOAD = ("dagster._grpc.impl", "dagster._core.execution.api")
"""Dagster's run execution, which a run worker needs beyond what a step process does."""


def run_worker_preload() -> list[str]:
    """What the run workers' forkserver imports before it forks one.

    What a step process of the multiprocess executor is forked with (the code location and what
    opening the instance imports, `ops.steps.FORKSERVER_PRELOAD`), Dagster's run execution, and
    the Anthropic SDK: the AI lineup's steps run in their run worker's threads and import it
    (the code location itself does not, `resources/llm.py`).
    """
    from ops.steps import preload_modules

    return [*preload_modules(llm_pool=True), *RUN_WORKER_EXTRA_PRELOAD]


class _RunWorkerPopen(popen_forkserver.Popen):
    """A forkserver child whose end is judged by its pid once the forkserver is gone.

    Python learns a forkserver child's exit code from the forkserver; when the forkserver dies
    (killed, or chosen by the out-of-memory killer) every child it forked reads as exited with
    255 although it still runs. Dagster's code server would then report each in-flight run
    FAILURE while its worker carries on. Here such a child counts as running while its pid
    names a live process, and as ended (code unknown, 255) once it does not.
    """

    def poll(self, flag: int = os.WNOHANG) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if not wait([self.sentinel], 0 if flag == os.WNOHANG else None):
            return None
        try:
            self.returncode = forkserver.read_signed(self.sentinel)
        except (OSError, EOFError):  # the forkserver died: its report of this exit is lost
            while process_alive(self.pid):
                if flag == os.WNOHANG:
                    return None
                time.sleep(_LOST_FORKSERVER_POLL_SECONDS)
            self.returncode = 255
        return self.returncode


class _RunWorkerProcess(ForkServerProcess):
    @staticmethod
    def _Popen(process_obj: Any) -> _RunWorkerPopen:
        return _RunWorkerPopen(process_obj)


class _RunWorkerContext(ForkServerContext):
    """The forkserver context, with children that outlive their forkserver (`_RunWorkerPopen`)."""

    Process = _RunWorkerProcess


def run_worker_context(preload: Sequence[str] | None = None) -> Any:
    """The multiprocessing context run workers start from: a forkserver preloading `preload`.

    A forkserver that died is started again (with its preload) by the next run's start.
    """
    context = _RunWorkerContext()
    context.set_forkserver_preload(list(run_worker_preload() if preload is None else preload))
    return context


def _warm(context: Any, logger: logging.Logger) -> None:
    """Start the forkserver and fork one process from it, so the first run does not wait.

    The forkserver accepts a request only once it has imported its preload, so the child's
    start returning means the code location is loaded there.
    """
    started = time.monotonic()
    try:
        child = context.Process(target=os.getpid, name="forkserver-warm-up")
        child.start()
        child.join()
    except Exception:  # the first run starts the forkserver again and reports any error as its own
        logger.exception("could not start the run workers' forkserver in advance")
    else:
        logger.info(
            "run workers' forkserver ready, code location preloaded (%.1f s)",
            time.monotonic() - started,
        )


def build_server(
    *,
    host: str,
    port: int | None,
    socket: str | None,
    module: str,
    attribute: str,
    location_name: str,
    logger: logging.Logger,
) -> Any:
    """The gRPC server, not yet serving, whose run workers fork from `run_worker_context()`."""
    from dagster._core.types.loadable_target_origin import LoadableTargetOrigin
    from dagster._core.utils import FuturesAwareThreadPoolExecutor
    from dagster._grpc.server import DagsterApiServer, DagsterGrpcServer

    termination = threading.Event()
    pool = FuturesAwareThreadPoolExecutor()
    servicer = DagsterApiServer(
        server_termination_event=termination,
        logger=logger,
        server_threadpool_executor=pool,
        loadable_target_origin=LoadableTargetOrigin(
            executable_path=sys.executable,
            module_name=module,
            attribute=attribute,
            working_directory=os.getcwd(),
        ),
        lazy_load_user_code=True,
        location_name=location_name,
    )
    # The one change to Dagster's server: where its StartRun takes run worker processes from.
    servicer._mp_ctx = run_worker_context()
    threading.Thread(
        target=_warm, args=(servicer._mp_ctx, logger), name="forkserver-warm-up", daemon=True
    ).start()
    return DagsterGrpcServer(
        server_termination_event=termination,
        dagster_api_servicer=servicer,
        port=port,
        socket=socket,
        host=host,
        logger=logger,
        threadpool_executor=pool,
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the code location over gRPC until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="airwave-code-server", add_help=False)
    parser.add_argument("-h", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int)
    parser.add_argument("-s", "--socket")
    parser.add_argument("-m", "--module-name", default=DEFAULT_MODULE)
    parser.add_argument("-a", "--attribute", default=DEFAULT_ATTRIBUTE)
    parser.add_argument("--location-name", default="airwave")
    parser.add_argument("--help", action="help")
    args = parser.parse_args(argv)
    if (args.port is None) == (args.socket is None):
        parser.error("give one of --port or --socket")

    from dagster._utils.interrupts import setup_interrupt_handlers
    from dagster._utils.log import configure_loggers

    setup_interrupt_handlers()
    configure_loggers(log_level="INFO")
    logger = logging.getLogger("dagster.code_server")
    where = f"port {args.port}" if args.port is not None else f"socket {args.socket}"
    logger.info("Starting the airwave code server on %s in process %d", where, os.getpid())
    server = build_server(
        host=args.host,
        port=args.port,
        socket=args.socket,
        module=args.module_name,
        attribute=args.attribute,
        location_name=args.location_name,
        logger=logger,
    )
    logger.info("Started the airwave code server on %s", where)
    try:
        server.serve()
    except KeyboardInterrupt:
        logger.info("The airwave code server was interrupted")
    finally:
        logger.info("Shutting down the airwave code server on %s", where)


if __name__ == "__main__":
    main()
