"""The webserver process of `airwave serve`: Dagster's webserver app with identity and permissions.

`dagster-webserver` builds its request contexts from a plain `WorkspaceProcessContext`, whose
permission map is "everything" (or "nothing" with `--read-only`) for every request. This entry
point builds the same app (`DagsterWebserver` over a workspace file, served by uvicorn) from
`PrincipalProcessContext` and wraps it in `IdentityMiddleware`, so each request's permissions are
its principal's (docs/security.md). The policy is asked for on every request; `load_policy`
re-reads the file only when it changed, so an edit applies to the next request.

Usage: `python -m airwave_dagster.webapp.server -w WORKSPACE -h HOST -p PORT`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from airwave_dagster.domain.permissions import LOCAL_OPERATOR, Policy
from airwave_dagster.webapp.identity import IdentityMiddleware, IdentityRules

_STATEMENT_TIMEOUT_MS = 15_000
_POOL_RECYCLE_SECONDS = 3600
_POOL_MAX_OVERFLOW = 20
"""`dagster-webserver`'s own defaults for its database pool."""


def identity_rules(policy: Callable[[], Policy]) -> IdentityRules:
    """The middleware's rules from the settings and the current `policy()`."""
    from airwave_dagster.permissions import PRINCIPAL_HEADER
    from airwave_dagster.settings import Settings

    settings = Settings.load()
    return IdentityRules(
        proxies=settings.trusted_proxy_networks(),
        identity_header=settings.identity_header,
        principal_header=PRINCIPAL_HEADER,
        principal_for=lambda identity: policy().principal_for(identity),
        local_operator=LOCAL_OPERATOR,
    )


@contextlib.asynccontextmanager
async def _lifespan(app: Any) -> AsyncIterator[None]:
    # uvicorn cancels the lifespan task on SIGTERM; that is a normal stop, not an error.
    with contextlib.suppress(asyncio.CancelledError):
        yield


def main(argv: Sequence[str] | None = None) -> None:
    """Serve the Dagster UI for the workspace file until SIGTERM or SIGINT."""
    parser = argparse.ArgumentParser(prog="airwave-webserver", add_help=False)
    parser.add_argument("-w", "--workspace", required=True)
    parser.add_argument("-h", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    parser.add_argument("--help", action="help")
    args = parser.parse_args(argv)

    import dagster as dg
    import uvicorn
    from dagster._core.workspace.load_target import WorkspaceFileTarget
    from dagster_webserver.version import __version__
    from dagster_webserver.webserver import DagsterWebserver

    from airwave_dagster.permissions import JOB_PERMISSIONS, load_policy
    from airwave_dagster.webapp.context import PrincipalProcessContext

    logging.basicConfig(level=logging.INFO)
    load_policy()  # a broken permissions file stops the webserver at start, naming the problem
    rules = identity_rules(load_policy)
    with dg.DagsterInstance.get() as instance:
        instance.optimize_for_webserver(
            _STATEMENT_TIMEOUT_MS, _POOL_RECYCLE_SECONDS, _POOL_MAX_OVERFLOW
        )
        with PrincipalProcessContext(
            instance,
            version=__version__,
            read_only=False,
            workspace_load_target=WorkspaceFileTarget(paths=[args.workspace]),
            policy=load_policy,
            jobs=JOB_PERMISSIONS,
        ) as process_context:
            app = DagsterWebserver(process_context).create_asgi_app(lifespan=_lifespan)
            uvicorn.run(
                IdentityMiddleware(app, rules),
                host=args.host,
                port=args.port,
                log_level="warning",
                # The peer address is what the middleware judges: uvicorn must not replace it
                # with an X-Forwarded-For a client wrote.
                proxy_headers=False,
            )


if __name__ == "__main__":
    main()
