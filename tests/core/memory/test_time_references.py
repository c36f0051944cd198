"""Time references in queries: what they mean, what they match, what they leave of the text."""

from datetime import UTC, datetime, timedelta, timezone

import numpy
import pytest

from ai_assistant.memory.search.time_references import (
    TimeWindow,
    find_time_references,
    strip_spans,
    window_mask,
)

NOW = datetime(2023, 10, 20, 15, 30, tzinfo=UTC)  # a Friday


def day(year, month, date, tz=UTC):
    return datetime(year, month, date, tzinfo=tz)


def windows(text, now=NOW):
    return find_time_references(text, now)[0]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What did Brannoc forge on 9 November, 2022?", TimeWindow(2022, 11, 9)),
        ("the 9th of November", TimeWindow(None, 11, 9)),
        ("November 9, 2022", TimeWindow(2022, 11, 9)),
        ("Nov 9", TimeWindow(None, 11, 9)),
        ("what happened on 2022-11-09", TimeWindow(2022, 11, 9)),
        ("What did you carve in April 2022?", TimeWindow(2022, 4, None)),
        ("Where did you go fishing in July?", TimeWindow(None, 7, None)),
        ("How often did you row in 2023?", TimeWindow(2023, None, None)),
        ("I may come by in sept.", TimeWindow(None, 9, None)),
    ],
)
def test_calendar_dates(text, expected):
    assert windows(text) == [expected]


@pytest.mark.parametrize(
    "text",
    ["Did you march in the parade?", "I may come", "We march on, jan.", "2 of the 31 swords",
     "you owe me 7 gold"],
)
def test_words_that_only_look_like_dates_are_not(text):
    assert windows(text) == []


def test_a_range_is_one_window_from_the_first_day_to_the_last_inclusive():
    found, spans = find_time_references("Where was Ilse between August 11 and August 15 2023?",
                                        NOW)  # fmt: skip
    assert found == [TimeWindow(start=day(2023, 8, 11), end=day(2023, 8, 16))]
    assert strip_spans("Where was Ilse between August 11 and August 15 2023?",
                       spans) == "Where was Ilse between and ?"  # fmt: skip
    assert windows("from 3 May to 9 May 2023") == [
        TimeWindow(start=day(2023, 5, 3), end=day(2023, 5, 10))
    ]


@pytest.mark.parametrize(
    "text, start, end",
    [
        ("What happened today?", day(2023, 10, 20), day(2023, 10, 21)),
        ("what did you eat this morning", day(2023, 10, 20), day(2023, 10, 21)),
        ("What happened yesterday?", day(2023, 10, 19), day(2023, 10, 20)),
        ("who came by last night", day(2023, 10, 19), day(2023, 10, 20)),
        ("what did you do 3 days ago", day(2023, 10, 16), day(2023, 10, 19)),
        ("a few days ago", day(2023, 10, 16), day(2023, 10, 19)),
        ("two weeks ago", day(2023, 10, 2), day(2023, 10, 10)),
        ("this week", day(2023, 10, 16), day(2023, 10, 23)),
        ("last week", day(2023, 10, 9), day(2023, 10, 16)),
        ("on Monday", day(2023, 10, 16), day(2023, 10, 17)),
        ("last Friday", day(2023, 10, 13), day(2023, 10, 14)),
        ("on Friday", day(2023, 10, 20), day(2023, 10, 21)),
    ],
)
def test_relative_references_count_from_now(text, start, end):
    assert windows(text) == [TimeWindow(start=start, end=end)]


def test_relative_months_and_years_are_calendar_spans():
    assert windows("this month") == [TimeWindow(2023, 10, None)]
    assert windows("last month") == [TimeWindow(2023, 9, None)]
    assert windows("a month ago") == [TimeWindow(2023, 9, None)]
    assert windows("eleven months ago") == [TimeWindow(2022, 11, None)]
    assert windows("last year") == [TimeWindow(2022, None, None)]
    assert windows("two years ago") == [TimeWindow(2021, None, None)]


def test_relative_days_follow_the_time_zone_of_now():
    tokyo = timezone(timedelta(hours=9))
    now = datetime(2023, 10, 20, 1, 0, tzinfo=tokyo)  # still the 19th in UTC
    assert windows("yesterday", now) == [
        TimeWindow(start=day(2023, 10, 19, tokyo), end=day(2023, 10, 20, tokyo))
    ]


def test_strip_spans_leaves_the_rest_of_the_question():
    text = "What stew did Brannoc make on 9 November, 2022 and yesterday?"
    _, spans = find_time_references(text, NOW)
    assert strip_spans(text, spans) == "What stew did Brannoc make on and ?"
    assert strip_spans("no dates here", []) == "no dates here"


def test_window_mask_matches_calendar_fields_and_ranges():
    epochs = numpy.array([
        day(2022, 11, 9).timestamp() + 3600,
        day(2022, 11, 10).timestamp(),
        day(2023, 11, 9).timestamp(),
        numpy.nan,
    ])  # fmt: skip
    assert window_mask([TimeWindow(2022, 11, 9)], epochs).tolist() == [True, False, False, False]
    assert window_mask([TimeWindow(None, 11, 9)], epochs).tolist() == [True, False, True, False]
    assert window_mask([TimeWindow(2022, None, None)], epochs).tolist() == [
        True, True, False, False]  # fmt: skip
    ranged = TimeWindow(start=day(2022, 11, 10), end=day(2023, 1, 1))
    assert window_mask([ranged], epochs).tolist() == [False, True, False, False]
    # several windows: any of them
    assert window_mask([TimeWindow(2022, 11, 9), ranged], epochs).tolist() == [
        True, True, False, False]  # fmt: skip
    # calendar fields are read in the given time zone: 01:00 UTC on the 9th is the 8th at -5h
    assert window_mask([TimeWindow(2022, 11, 8)], epochs, utc_offset=-5 * 3600).tolist() == [
        True, False, False, False]  # fmt: skip


@pytest.mark.parametrize(
    "text, start, end",
    [
        ("What did the forge sell as of December 2022?", None, day(2023, 1, 1)),
        ("before June 2023", None, day(2023, 6, 1)),
        ("prior to last month", None, day(2023, 9, 1)),
        ("by the end of 2022", None, day(2023, 1, 1)),
        ("until March", None, day(2023, 4, 1)),  # the latest March not after now
        ("after 9 May", day(2023, 5, 10), None),
        ("since November", day(2022, 11, 1), None),  # no November has begun this year yet
        ("since last week", day(2023, 10, 9), None),
    ],
)
def test_a_period_is_everything_on_its_side_of_the_anchor(text, start, end):
    assert windows(text) == [TimeWindow(start=start, end=end)]


@pytest.mark.parametrize(
    "text, start, end",
    [
        # what happened then is told then or later, up to the anchor
        ("What did Ilse mend the week before August 3, 2023?", day(2023, 7, 27),
         day(2023, 8, 4)),
        ("the pony she got two weeks before August 11, 2023", day(2023, 7, 24),
         day(2023, 8, 12)),
        ("the day after 9 May 2023", day(2023, 5, 10), day(2023, 5, 11)),
        ("three days after 9 May 2023", day(2023, 5, 11), day(2023, 5, 14)),
    ],
)
def test_a_time_that_far_from_the_anchor_is_not_the_whole_side(text, start, end):
    assert windows(text) == [TimeWindow(start=start, end=end)]


def test_a_period_cue_leaves_the_text_with_the_date_and_plain_words_are_no_cue():
    text = "Who ran the ferry before June 2023?"
    _, spans = find_time_references(text, NOW)
    assert strip_spans(text, spans) == "Who ran the ferry ?"
    assert windows("who came by last night") == [TimeWindow(start=day(2023, 10, 19),
                                                            end=day(2023, 10, 20))]
    assert windows("the letter from 2019") == [TimeWindow(2019, None, None)]


def test_as_of_ranks_the_last_word_before_the_anchor_not_the_nearest_date():
    from ai_assistant.memory.search.journal_search import search_entries
    from ai_assistant.memory.search.params import SearchParams

    entries = [
        {"id": 1, "content": "Brannoc said the forge has two apprentices.",
         "timestamp": "2022-02-10T10:00:00Z", "importance": 5},
        {"id": 2, "content": "A storm took the roof of the smithy.",
         "timestamp": "2023-01-05T10:00:00Z", "importance": 5},
        {"id": 3, "content": "Brannoc said the forge took on a third and a fourth apprentice.",
         "timestamp": "2023-03-14T10:00:00Z", "importance": 5},
    ]  # fmt: skip
    params = SearchParams(alpha_recency=0, alpha_importance=0, time_boost=1.0)
    question = "How many apprentices did the forge have as of December 2022?"
    ranked = [entry["id"] for _, entry in search_entries(entries, question, now=NOW,
                                                          params=params)]  # fmt: skip
    assert ranked[0] == 1  # the forge's last word on it before the end of December 2022
    ranked = [entry["id"] for _, entry in search_entries(
        entries, "How many apprentices did the forge have after January 2023?", now=NOW,
        params=params)]  # fmt: skip
    assert ranked[0] == 3
