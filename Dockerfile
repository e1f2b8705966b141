# airwave-dagster: one image for every role of compose.yaml (code server, webserver, daemon).
#   docker build -t airwave-dagster .
#   docker build --build-arg BASE_IMAGE=airwave-base:bookworm -t airwave-dagster .   # no registry
# BASE_IMAGE must provide python3 (3.11 or 3.12) with the venv module; the default is the usual
# public Python image, tests/container/base_image.sh builds an equivalent from Debian packages.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS build
ARG UV_VERSION=0.13.9
# uv from PyPI into its own venv: works on images whose system Python refuses pip (PEP 668).
RUN python3 -m venv /opt/uv && /opt/uv/bin/pip install --no-cache-dir "uv==${UV_VERSION}"
# UV_NATIVE_TLS: uv trusts the image's CA store (where a proxy's CA would be), like pip does.
ENV UV_COMPILE_BYTECODE=1 \
    UV_NATIVE_TLS=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/app/.venv
WORKDIR /src
# Dependencies first, from the lockfile only: this layer survives source edits. (No BuildKit
# cache mounts: the image must build with the classic builder too, as on Docker 20.10 without buildx.)
COPY pyproject.toml uv.lock README.md ./
RUN /opt/uv/bin/uv sync --frozen --no-dev --no-install-project --no-cache --python python3
COPY airwave_dagster ./airwave_dagster
COPY ops ./ops
COPY resources ./resources
COPY sensors ./sensors
# --no-editable: the project goes into site-packages as a wheel would, so /src is not needed.
RUN /opt/uv/bin/uv sync --frozen --no-dev --no-editable --no-cache --python python3

FROM ${BASE_IMAGE}
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin airwave \
    && mkdir -p /data/home /data/inbox \
    && chown -R airwave:airwave /data
COPY --from=build /app/.venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    AIRWAVE_HOME=/data/home \
    AIRWAVE_INBOX=/data/inbox
USER airwave
WORKDIR /data/home
EXPOSE 3000 4266
# The webserver's /server_info, or the code server's gRPC ping, whichever this container runs.
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python3", "-m", "airwave_dagster.cli.healthcheck"]
ENTRYPOINT ["airwave"]
# Loopback only, as everywhere else: the UI has no authentication. Opening it is an explicit
# command (docs/deploy.md, "The image on its own"): serve --host 0.0.0.0 --allow-remote.
CMD ["serve"]
