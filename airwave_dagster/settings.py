"""Every setting the `airwave` commands, the bootstrap and the composition root read, in one class.

Values come from the environment, then from an optional dotenv file (`.env` in the working
directory, or the file `AIRWAVE_ENV_FILE` names); the environment wins. A wrong value fails at
start with the variable's name (`Settings.load`). This is the only module that reads the process
environment; Dagster resources still receive secrets as `dg.EnvVar` in `definitions.py`, so a
secret never enters run config.
"""

from __future__ import annotations

import os
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DATABASE_URL_ENV = "AIRWAVE_DATABASE_URL"
DAGSTER_PG_URL_ENV = "AIRWAVE_DAGSTER_PG_URL"
HOME_ENV = "AIRWAVE_HOME"
INBOX_ENV = "AIRWAVE_INBOX"
PLEX_URL_ENV = "PLEX_URL"
PLEX_TOKEN_ENV = "PLEX_TOKEN"
CLAIM_STALE_ENV = "AIRWAVE_CLAIM_STALE_SECONDS"
API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"
ENV_FILE_ENV = "AIRWAVE_ENV_FILE"
DAGSTER_HOME_ENV = "DAGSTER_HOME"
EXECUTOR_ENV = "AIRWAVE_EXECUTOR"
CELERY_BROKER_ENV = "AIRWAVE_CELERY_BROKER_URL"
CELERY_QUEUE_ENV = "AIRWAVE_CELERY_QUEUE"
PERMISSIONS_ENV = "AIRWAVE_PERMISSIONS"
LLM_CONCURRENCY_ENV = "AIRWAVE_LLM_CONCURRENCY"
FAILPOINTS_DIR_ENV = "AIRWAVE_FAILPOINTS_DIR"
MODE_ENV = "AIRWAVE_MODE"
SOURCE_ID_ENV = "AIRWAVE_SOURCE_ID"
AIRWAVE_USER_ENV = "AIRWAVE_USER"
AUTH_SECRET_ENV = "BETTER_AUTH_SECRET"
TRUSTED_PROXIES_ENV = "AIRWAVE_TRUSTED_PROXIES"
IDENTITY_HEADER_ENV = "AIRWAVE_IDENTITY_HEADER"

CHECKOUT_ROOT = Path(__file__).resolve().parents[1]
"""Where a checkout keeps `pyproject.toml`; an installed wheel has none there."""


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message names the variable."""


class Settings(BaseSettings):
    """The project's settings (environment variables, then the dotenv file)."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        # An exported-but-empty variable has always meant "unset" to the bootstrap (a blank
        # AIRWAVE_HOME must not become the working directory).
        env_ignore_empty=True,
        # No populate_by_name: pydantic-settings would then also read each field's bare name
        # from the environment, so HOME became the home and EXECUTOR or INBOX would be read too.
        frozen=True,
    )

    home: Path | None = Field(
        default=None,
        validation_alias=HOME_ENV,
        description=(
            "Local state: private Postgres, DAGSTER_HOME, emulator state, logs, the inbox. "
            "Default: `.airwave/` of the checkout, else the user data directory."
        ),
    )
    database_url: str | None = Field(
        default=None,
        validation_alias=DATABASE_URL_ENV,
        repr=False,
        description="The project database; unset starts a private PostgreSQL under the home.",
    )
    dagster_pg_url: str | None = Field(
        default=None,
        validation_alias=DAGSTER_PG_URL_ENV,
        repr=False,
        description="Dagster's storage; unset means the project database, schema `dagster`.",
    )
    dagster_home: Path | None = Field(
        default=None,
        validation_alias=DAGSTER_HOME_ENV,
        description="Dagster's instance directory; unset means `<home>/dagster_home`.",
    )
    plex_url: str | None = Field(
        default=None,
        validation_alias=PLEX_URL_ENV,
        description="The Plex server; unset starts the bundled emulator with a demo library.",
    )
    plex_token: SecretStr | None = Field(
        default=None, validation_alias=PLEX_TOKEN_ENV, description="The Plex token."
    )
    inbox: Path | None = Field(
        default=None,
        validation_alias=INBOX_ENV,
        description="Folder the upload sensor watches; unset means `<home>/inbox`.",
    )
    claim_stale_seconds: float = Field(
        default=60.0,
        gt=0,
        validation_alias=CLAIM_STALE_ENV,
        description="A channel claim without a heartbeat for this long may be taken over.",
    )
    anthropic_api_key: SecretStr | None = Field(
        default=None,
        validation_alias=API_KEY_ENV,
        description="Key of the anthropic provider; unset means the offline provider.",
    )
    anthropic_base_url: str | None = Field(
        default=None,
        validation_alias=AliasChoices(BASE_URL_ENV),
        description="Messages API address (the local stub in tests); unset means Anthropic's.",
    )
    executor: Literal["multiprocess", "threads", "celery"] = Field(
        default="threads",
        validation_alias=EXECUTOR_ENV,
        description=(
            "How the fan-out jobs run their steps: `threads` (a thread of the run worker per "
            "step), `multiprocess` (a process per step) or `celery` (on `airwave worker`s)."
        ),
    )
    celery_broker_url: str | None = Field(
        default=None,
        validation_alias=CELERY_BROKER_ENV,
        repr=False,
        description="The celery broker when AIRWAVE_EXECUTOR=celery (redis:// or pyamqp://).",
    )
    celery_queue: str = Field(
        default="airwave",
        validation_alias=CELERY_QUEUE_ENV,
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="The celery queue steps are sent to and `airwave worker` listens on.",
    )
    llm_concurrency: int = Field(
        default=6,
        ge=1,
        le=1000,  # Dagster's most slots per pool (DAGSTER_MAX_GLOBAL_OP_CONCURRENCY_LIMIT)
        validation_alias=LLM_CONCURRENCY_ENV,
        description=(
            "Steps that call the model (planner, channel builds) running at once across all "
            "runs and workers: the limit of Dagster's `llm` pool, written at every run start."
        ),
    )
    permissions: Path | None = Field(
        default=None,
        validation_alias=PERMISSIONS_ENV,
        description=(
            "The permissions file (YAML: roles, principals, identities; docs/security.md). "
            "Unset: whoever runs `airwave` may do everything (the single-user default)."
        ),
    )

    mode: Literal["standalone", "attached"] = Field(
        default="standalone",
        validation_alias=MODE_ENV,
        description=(
            "`standalone`: the project creates Airwave's tables in its own database. `attached`: "
            "AIRWAVE_DATABASE_URL is a running Airwave's database, whose tables are only read and "
            "written, never created or altered (docs/attached.md)."
        ),
    )
    source_id: str | None = Field(
        default=None,
        validation_alias=SOURCE_ID_ENV,
        description=(
            "Attached mode: the id of the Airwave media source to build against. Unset: "
            "Airwave's default source, else its only one."
        ),
    )
    airwave_user: str | None = Field(
        default=None,
        validation_alias=AIRWAVE_USER_ENV,
        description=(
            "Email of the Airwave user recorded as the creator of new channels. Unset: the "
            "oldest admin in attached mode (as Airwave's own job trigger), nobody standalone."
        ),
    )
    better_auth_secret: SecretStr | None = Field(
        default=None,
        validation_alias=AUTH_SECRET_ENV,
        description=(
            "Attached mode: Airwave's BETTER_AUTH_SECRET, the key of its Plex token and AI keys "
            "at rest. Needed only when those are stored encrypted."
        ),
    )

    trusted_proxies: str | None = Field(
        default=None,
        validation_alias=TRUSTED_PROXIES_ENV,
        description=(
            "`airwave serve`: comma-separated addresses or networks (CIDR) of the reverse proxies "
            "whose identity header the webserver believes (docs/security.md). Unset: no proxy; "
            "every request is the local operator and identity headers are refused."
        ),
    )
    identity_header: str = Field(
        default="Remote-User",
        validation_alias=IDENTITY_HEADER_ENV,
        pattern=r"^[A-Za-z0-9-]+$",
        description=(
            "`airwave serve`: the request header in which a trusted proxy names the "
            "authenticated user (`Remote-User`; oauth2-proxy and others send `X-Forwarded-User`)."
        ),
    )

    failpoints_dir: Path | None = Field(
        default=None,
        validation_alias=FAILPOINTS_DIR_ENV,
        description=(
            "Crash tests only: the directory whose files arm the failpoints of "
            "`airwave_dagster/failpoints.py` (an armed point kills its process). Never set it "
            "in a deployment."
        ),
    )

    @property
    def attached(self) -> bool:
        """True when the project runs on a real Airwave's database (docs/attached.md)."""
        return self.mode == "attached"

    def trusted_proxy_networks(self) -> tuple[IPv4Network | IPv6Network, ...]:
        """The trusted proxies as networks (a bare address is a one-address network)."""
        return tuple(
            ip_network(part.strip(), strict=False)
            for part in (self.trusted_proxies or "").split(",")
            if part.strip()
        )

    @field_validator("trusted_proxies")
    @classmethod
    def _proxies_parse(cls, value: str | None) -> str | None:
        for part in (value or "").split(","):
            if part.strip():
                try:
                    ip_network(part.strip(), strict=False)
                except ValueError:
                    raise ValueError(
                        f"{part.strip()!r} is not an address or CIDR network"
                    ) from None
        return value

    @classmethod
    def load(cls) -> Settings:
        """Read and validate the settings, or raise `SettingsError` naming each bad variable."""
        env_file = os.environ.get(ENV_FILE_ENV) or ".env"
        try:
            return cls(_env_file=env_file)
        except ValidationError as error:
            problems = []
            for item in error.errors():
                name = str(item["loc"][0]) if item["loc"] else "?"
                field = cls.model_fields.get(name)
                alias = field.validation_alias if field is not None else None
                variable = alias if isinstance(alias, str) else name
                problems.append(f"{variable}: {item['msg']}")
            raise SettingsError("invalid settings: " + "; ".join(problems)) from None

    def resolved_home(self) -> Path:
        """The home directory: `AIRWAVE_HOME`, a checkout's `.airwave/`, else the user data dir."""
        if self.home is not None:
            return self.home.expanduser().resolve()
        if (CHECKOUT_ROOT / "pyproject.toml").is_file():
            return CHECKOUT_ROOT / ".airwave"
        from platformdirs import user_data_path

        return user_data_path("airwave-dagster", appauthor=False)

    def resolved_inbox(self) -> Path:
        """The upload sensor's folder: `AIRWAVE_INBOX`, else `<home>/inbox`."""
        if self.inbox is not None:
            return self.inbox.expanduser().resolve()
        return self.resolved_home() / "inbox"
