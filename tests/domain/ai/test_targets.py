"""The lineup's quality targets judged on measured lineups (the `ai_lineup` asset checks)."""

from __future__ import annotations

from airwave_dagster.domain.ai.quality import BuiltChannel, lineup_quality
from airwave_dagster.domain.ai.targets import MAX_JACCARD, TARGETS, judge_lineup
from airwave_dagster.domain.library import MediaItem

HOUR_MS = 3_600_000


def _movies(prefix: str, n: int, rating: str, genre: str) -> list[MediaItem]:
    return [
        MediaItem(
            rating_key=f"{prefix}{i}",
            type="movie",
            title=f"{prefix} {i}",
            duration_ms=2 * HOUR_MS,
            content_rating=rating,
            genres=(genre,),
        )
        for i in range(n)
    ]


def _verdicts(library: list[MediaItem], channels: list[BuiltChannel]) -> dict[str, bool]:
    return {v.name: v.passed for v in judge_lineup(lineup_quality(library, channels))}


def test_every_target_is_judged_and_only_the_audience_ceiling_blocks() -> None:
    names = [t.name for t in TARGETS]

    assert names == [
        "audience_ceiling",
        "no_strict_subsets",
        "overlap_bound",
        "channels_per_item",
        "channels_verified",
        "genres_covered",
    ]
    assert [t.name for t in TARGETS if t.blocking] == ["audience_ceiling"]


def test_a_lineup_of_distinct_sized_channels_meets_every_target() -> None:
    family = _movies("f", 6, "PG", "Family")
    thrillers = _movies("t", 6, "R", "Thriller")

    verdicts = _verdicts(
        family + thrillers,
        [BuiltChannel("Family Movies", family), BuiltChannel("Thrillers", thrillers)],
    )

    assert verdicts == dict.fromkeys(verdicts, True)
    assert len(verdicts) == len(TARGETS)


def test_a_family_channel_above_its_ceiling_fails_the_blocking_check() -> None:
    family = _movies("f", 6, "PG", "Family")
    thrillers = _movies("t", 6, "R", "Thriller")
    # Two R-rated thrillers slipped into the family channel; the thrillers channel still exists.
    slipped = family + thrillers[:2]

    quality = lineup_quality(
        family + thrillers,
        [BuiltChannel("Family Movies", slipped), BuiltChannel("Thrillers", thrillers)],
    )
    verdicts = {v.name: v for v in judge_lineup(quality)}

    ceiling = verdicts["audience_ceiling"]
    assert not ceiling.passed and ceiling.blocking
    assert "2 item(s) above the ceiling" in ceiling.summary


def test_unrated_items_on_a_kids_channel_count_as_above_the_ceiling() -> None:
    cartoons = _movies("c", 6, "G", "Animation")
    unrated = [item.model_copy(update={"content_rating": None}) for item in cartoons[:1]]

    verdicts = _verdicts(cartoons, [BuiltChannel("Kids Cartoons", cartoons[1:] + unrated)])

    assert verdicts["audience_ceiling"] is False


def test_the_targets_each_fail_on_their_own_measure() -> None:
    comedy = _movies("c", 8, "PG-13", "Comedy")
    drama = _movies("d", 12, "PG-13", "Drama")
    tiny = _movies("x", 2, "PG-13", "Western")

    verdicts = _verdicts(
        comedy + drama + tiny,
        [
            BuiltChannel("Comedy", comedy),
            BuiltChannel("Comedy Classics", comedy[:5]),  # inside "Comedy": subset and overlap
            BuiltChannel("Comedy Again", comedy),  # the same pool: no subset, but overlap 1.0
            BuiltChannel("Comedy Late", comedy[2:]),
            BuiltChannel("Westerns", tiny),  # 2 items, 4 h: not verified
        ],
    )

    assert verdicts == {
        "audience_ceiling": True,
        "no_strict_subsets": False,
        "overlap_bound": False,
        "channels_per_item": True,  # 8 + 5 + 8 + 6 + 2 entries over 22 items: 1.32
        "channels_verified": False,
        "genres_covered": False,  # 24 h of drama and no channel about it
    }
    assert MAX_JACCARD == 0.5


def test_channels_per_item_fails_above_two_and_a_half() -> None:
    comedy = _movies("c", 6, "PG-13", "Comedy")

    channels = [BuiltChannel(f"Comedy {n}", comedy) for n in range(3)]

    assert _verdicts(comedy, channels)["channels_per_item"] is False
    assert _verdicts(comedy, channels[:2])["channels_per_item"] is True
