"""nginx from Debian as the authenticating reverse proxy in front of `airwave serve` (tests only).

The same setup docs/security.md shows: basic auth against an htpasswd file, the authenticated
user passed on in `Remote-User`, any client-sent `X-Airwave-Principal` dropped, WebSockets
upgraded, and `proxy_bind` on a loopback address of its own so the webserver can tell the proxy
apart from every other local client (Linux routes all of 127.0.0.0/8 to the loopback device).
nginx runs in the foreground as the test's child, with every file under a temporary directory.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ports import free_port

NGINX = Path("/usr/sbin/nginx")
INSTALL = "apt-get install -y nginx"
PROXY_ADDRESS = "127.0.0.3"
"""The address nginx connects from (`proxy_bind`): the one `AIRWAVE_TRUSTED_PROXIES` names."""

CONFIG = """\
daemon off;
master_process off;
error_log {root}/error.log info;
pid {root}/nginx.pid;
events {{ worker_connections 256; }}
http {{
    access_log {root}/access.log;
    client_body_temp_path {root}/tmp/body;
    proxy_temp_path {root}/tmp/proxy;
    fastcgi_temp_path {root}/tmp/fastcgi;
    uwsgi_temp_path {root}/tmp/uwsgi;
    scgi_temp_path {root}/tmp/scgi;
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        ''      close;
    }}
    server {{
        listen 127.0.0.1:{port};
        auth_basic "airwave";
        auth_basic_user_file {root}/htpasswd;
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_bind {bind};
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_set_header Remote-User $remote_user;
            proxy_set_header X-Airwave-Principal "";
            proxy_set_header Authorization "";
            proxy_read_timeout 300s;
        }}
    }}
}}
"""


def nginx_binary() -> Path:
    """Debian's nginx; a missing one fails the test (CI installs it in `.ci/run`)."""
    if not NGINX.exists():
        pytest.fail(f"the proxy tests need Debian's nginx at {NGINX}: {INSTALL}")
    return NGINX


def htpasswd_line(user: str, password: str) -> str:
    """One htpasswd entry in nginx's salted-SHA1 scheme (`{SSHA}`), made without any tool."""
    salt = secrets.token_bytes(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return f"{user}:{{SSHA}}{base64.b64encode(digest + salt).decode()}\n"


@dataclass(frozen=True)
class Proxy:
    """A running nginx: where it listens and the users it knows."""

    port: int
    users: Mapping[str, str]
    root: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def authorization(self, user: str) -> str:
        """The basic-auth header value of `user`."""
        token = base64.b64encode(f"{user}:{self.users[user]}".encode()).decode()
        return f"Basic {token}"


@contextmanager
def nginx(upstream: int, users: Mapping[str, str], root: Path) -> Iterator[Proxy]:
    """nginx with basic auth for `users` in front of 127.0.0.1:`upstream`, until the block ends."""
    binary = nginx_binary()
    (root / "tmp").mkdir(parents=True, exist_ok=True)
    (root / "htpasswd").write_text("".join(htpasswd_line(u, p) for u, p in users.items()))
    port = free_port()
    conf = root / "nginx.conf"
    conf.write_text(CONFIG.format(root=root, port=port, upstream=upstream, bind=PROXY_ADDRESS))
    process = subprocess.Popen(
        [str(binary), "-p", str(root), "-e", str(root / "error.log"), "-c", str(conf)],
        stdout=subprocess.DEVNULL,
        stderr=(root / "stderr.log").open("w"),
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise AssertionError(
                    f"nginx exited ({process.returncode}): {(root / 'stderr.log').read_text()}"
                    f"{(root / 'error.log').read_text() if (root / 'error.log').exists() else ''}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError("nginx did not listen within 30 s") from None
                time.sleep(0.1)
        yield Proxy(port=port, users=dict(users), root=root)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
