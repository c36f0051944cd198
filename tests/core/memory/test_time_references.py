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
        ("What did Nate cook on 9 November, 2022?", TimeWindow(2022, 11, 9)),
        ("the 9th of November", TimeWindow(None, 11, 9)),
        ("November 9, 2022", TimeWindow(2022, 11, 9)),
        ("Nov 9", TimeWindow(None, 11, 9)),
        ("what happened on 2022-11-09", TimeWindow(2022, 11, 9)),
        ("What did you paint in April 2022?", TimeWindow(2022, 4, None)),
        ("Where did you go camping in July?", TimeWindow(None, 7, None)),
        ("How often did you swim in 2023?", TimeWindow(2023, None, None)),
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
    found, spans = find_time_references("Where was John between August 11 and August 15 2023?",
                                        NOW)  # fmt: skip
    assert found == [TimeWindow(start=day(2023, 8, 11), end=day(2023, 8, 16))]
    assert strip_spans("Where was John between August 11 and August 15 2023?",
                       spans) == "Where was John between and ?"  # fmt: skip
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
    text = "What dish did Nate make on 9 November, 2022 and yesterday?"
    _, spans = find_time_references(text, NOW)
    assert strip_spans(text, spans) == "What dish did Nate make on and ?"
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
