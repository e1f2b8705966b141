"""Run ids as people type them: the whole id, or any prefix that names one run (the UI shows 8).

Prefixes are looked up in Dagster's run storage with one `LIKE 'prefix%'` query over the
`runs` table, through libpq and no Dagster: a command that submits to a running webserver keeps
answering without loading it (README, "Using it").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import psycopg2

from airwave_dagster.cli import environment
from airwave_dagster.settings import Settings

FULL_LENGTH = 36
"""A Dagster run id is a UUID in its 36-character text form."""
_SHOWN = 10
"""Candidates listed for an ambiguous prefix; more are counted, not listed."""
_PREFIX = re.compile(r"[0-9a-f-]+")


@dataclass(frozen=True)
class Candidate:
    """A run whose id starts with the prefix given."""

    run_id: str
    job_name: str
    status: str
    created: datetime | None


class AmbiguousRunId(Exception):
    """The prefix starts the ids of several runs; `candidates` lists the newest of them."""

    def __init__(self, prefix: str, candidates: list[Candidate], total: int) -> None:
        self.prefix = prefix
        self.candidates = candidates
        self.total = total
        lines = [f"run id {prefix!r} is ambiguous: it starts {total} run ids; give more of it"]
        for c in candidates:
            created = f", created {c.created:%Y-%m-%d %H:%M:%S}" if c.created else ""
            lines.append(f"  {c.run_id}  {c.job_name} {c.status}{created}")
        if total > len(candidates):
            lines.append(f"  … and {total - len(candidates)} more")
        super().__init__("\n".join(lines))


def resolve(text: str, dagster_pg_url: str | None = None) -> str:
    """The one run id `text` names: itself when whole, else the only id it starts.

    Args:
        text: A run id or a prefix of one, as typed (case and surrounding blanks ignored).
        dagster_pg_url: Dagster's storage; by default the one `environment.prepare` exported.

    Returns:
        The full id; `text` as typed when nothing starts with it (the caller says "no run").

    Raises:
        AmbiguousRunId: Several runs' ids start with `text`.
    """
    prefix = text.strip().lower()
    if len(prefix) >= FULL_LENGTH or not _PREFIX.fullmatch(prefix):
        return text
    url = dagster_pg_url or Settings.load().dagster_pg_url
    if not url:
        return text
    matches, total = _matching(url, prefix)
    if total == 1:
        return matches[0].run_id
    if total > 1:
        raise AmbiguousRunId(prefix, matches, total)
    return text


def _matching(url: str, prefix: str) -> tuple[list[Candidate], int]:
    conn = psycopg2.connect(environment.libpq_dsn(environment.normalise_url(url)))
    try:
        with conn.cursor() as cur:
            # The prefix holds only hex digits and hyphens, so it needs no LIKE escaping.
            cur.execute(
                "SELECT run_id, pipeline_name, status, create_timestamp, count(*) OVER () "
                "FROM runs WHERE run_id LIKE %s ORDER BY create_timestamp DESC LIMIT %s",
                (prefix + "%", _SHOWN),
            )
            rows = cur.fetchall()
    finally:
        conn.close()
    candidates = [Candidate(str(r[0]), str(r[1]), str(r[2]), r[3]) for r in rows]
    return candidates, int(rows[0][4]) if rows else 0
