"""The preflight of a configured Plex: one cheap request before a command starts any run.

A wrong `PLEX_URL` or `PLEX_TOKEN` otherwise shows up as a run that fails 13-15 s later. The
check asks the server's root (`GET /`, what plexapi's `PlexServer` reads first) with a short
timeout: it answers when the server is unreachable, is not a Plex server, or refuses the token
(or its absence). The token travels only in the request header; no message here contains it.
"""

from __future__ import annotations

import http.client
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit
from xml.etree import ElementTree

from airwave_dagster.settings import PLEX_TOKEN_ENV, PLEX_URL_ENV

TIMEOUT_SECONDS = 0.8
"""A Plex server on the LAN answers its root in milliseconds; the refusal must come in under 1 s."""
_HINT = 'README, "Connecting your Plex server"'


def shown(url: str) -> str:
    """`url` safe to print: no user info, query or fragment (a token may ride in any of them)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def problem(url: str, token: str | None, timeout: float = TIMEOUT_SECONDS) -> str | None:
    """Why runs could not use the Plex server at `url` with `token`, or None when it answered.

    Args:
        url: `PLEX_URL`, the server's base URL.
        token: `PLEX_TOKEN`; None or empty sends no token (servers may allow that on the LAN).
        timeout: Seconds to wait for the connection and for each read.

    Returns:
        One line naming the variable to fix and the cause, never the token; None when the server
        answered as Plex.
    """
    where = shown(url)
    if urlsplit(url).scheme not in ("http", "https"):
        return f"{PLEX_URL_ENV}: {where!r} is not an http:// or https:// URL ({_HINT})"
    headers = {"Accept": "application/xml"}
    if token:
        headers["X-Plex-Token"] = token
    request = urllib.request.Request(url.rstrip("/") + "/", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read(1_000_000)
    except urllib.error.HTTPError as error:
        return _refused(where, error.code, token)
    except urllib.error.URLError as error:
        return _unreachable(where, error.reason, timeout)
    except OSError as error:  # a timeout while reading, a reset
        return _unreachable(where, error, timeout)
    except http.client.HTTPException as error:  # something that does not speak HTTP
        return _unreachable(where, type(error).__name__, timeout)
    except ValueError:
        return f"{PLEX_URL_ENV}: {where!r} is not a URL Plex can be reached at ({_HINT})"
    try:
        root = ElementTree.fromstring(body)
    except ElementTree.ParseError:
        root = None
    if root is None or root.tag != "MediaContainer":
        return (
            f"{PLEX_URL_ENV}: {where} answered, but not as a Plex Media Server does (no "
            f"MediaContainer at its root); point {PLEX_URL_ENV} at the server, usually port 32400"
        )
    return None


def _refused(where: str, status: int, token: str | None) -> str:
    if status == 401 and not token:
        return (
            f"{PLEX_TOKEN_ENV}: Plex at {where} needs a token (401 Unauthorized) and "
            f"{PLEX_TOKEN_ENV} is not set; {_HINT} says where to find yours"
        )
    if status == 401:
        return (
            f"{PLEX_TOKEN_ENV}: Plex at {where} refused the token (401 Unauthorized); check "
            f"{PLEX_TOKEN_ENV}, and that {PLEX_URL_ENV} is the right server"
        )
    return (
        f"{PLEX_URL_ENV}: {where} answered HTTP {status} instead of a Plex server's root; check "
        f"that {PLEX_URL_ENV} points at the server (usually port 32400)"
    )


def _unreachable(where: str, reason: object, timeout: float) -> str:
    if isinstance(reason, TimeoutError):
        cause = f"no answer within {timeout:g} s"
    else:
        cause = str(getattr(reason, "strerror", None) or reason)
    return (
        f"{PLEX_URL_ENV}: Plex is unreachable at {where} ({cause}); check that the server runs "
        f"and that {PLEX_URL_ENV} points at it"
    )
