"""The `library_profile` asset (plex_library → profile) and the `ai_lineup` asset it feeds."""

import hashlib
import json
from typing import Any

import dagster as dg

from airwave_dagster.domain.ai.profile import LibraryProfile, build_profile
from resources.ai_store import AiStore, media_items
from resources.database import DatabaseResource
from resources.plex import PlexResource

LIBRARY_PROFILE_KEY = dg.AssetKey("library_profile")
AI_LINEUP_KEY = dg.AssetKey("ai_lineup")


def profile_sha256(profile: LibraryProfile) -> str:
    """A stable digest of a profile (its canonical JSON), to tell profiles apart in metadata."""
    text = json.dumps(profile.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def compute_profile(store: AiStore, source_id: str) -> LibraryProfile:
    """The profile of a source's available snapshot items (no Plex call: spec §3)."""
    return build_profile(media_items(store, source_id), source_id=source_id)


def profile_metadata(profile: LibraryProfile, sha256: str) -> dict[str, Any]:
    """What the catalog shows for a profile."""
    totals = profile.totals
    return {
        "source_id": profile.source_id,
        "movies": totals.movies,
        "shows": totals.shows,
        "episodes": totals.episodes,
        "hours": round(totals.movie_hours + totals.episode_hours, 1),
        "genres": len(profile.genres),
        "sha256": sha256,
        "profile": dg.MetadataValue.md(f"```\n{profile.render_text()}\n```"),
    }


@dg.asset(
    key=LIBRARY_PROFILE_KEY,
    deps=["plex_library"],
    group_name="library",
    code_version="library-profile-v1",
    description=(
        "A small statistical summary of the library snapshot (titles per genre, studio, rating "
        "and decade, the biggest shows, score and runtime distributions) that the AI planner "
        "designs a lineup from. Stored as JSON in airwave.library_profile."
    ),
)
def library_profile(
    context: dg.AssetExecutionContext, database: DatabaseResource, plex: PlexResource
) -> dg.MaterializeResult:
    """Profile the available items of the Plex server's snapshot and store the profile."""
    store = database.get_store()
    source_id = store.find_source(plex.base_url)
    if source_id is None:
        raise dg.Failure(
            description=(
                f"no library snapshot of {plex.base_url} yet: materialize plex_library first"
            )
        )
    ai = AiStore(store.engine)
    profile = compute_profile(ai, source_id)
    sha256 = profile_sha256(profile)
    ai.save_profile(source_id, profile.model_dump(mode="json"), sha256, context.run_id)
    return dg.MaterializeResult(metadata=profile_metadata(profile, sha256))


ai_lineup_asset = dg.AssetSpec(
    AI_LINEUP_KEY,
    deps=[LIBRARY_PROFILE_KEY],
    group_name="library",
    description=(
        "The AI-built lineup (packages and verified channels). Materialised by the report step "
        "of the ai_lineup job."
    ),
)
