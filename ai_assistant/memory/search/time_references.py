"""
Time references in a query: the days, months or years a question is about.

"What did Nate cook on 9 November, 2022?", "Where were you in April?", "What happened
yesterday?" - the journal knows when each entry was written, so the search can favour the
entries from the time the question names (`journal.time_boost`) instead of matching the words
"november" or "yesterday" against what was said.

Understood (English, case-insensitive):

- calendar dates: "9 November, 2022", "the 9th of November", "November 9, 2022", "Nov 9",
  "2022-11-09", "November 2022", "in November" (a month on its own needs a word such as "in",
  "during" or "last" before it, so "march" and "may" stay verbs), "in 2022";
- ranges: "between August 11 and August 15, 2023", "from 3 May to 9 May" (a date without a
  year takes the year of the next date that has one);
- relative to now: "today", "tonight", "this morning", "yesterday", "last night",
  "3 days ago", "two weeks ago", "a month ago", "this/last week" (weeks start on Monday),
  "this/last month", "this/last year", "on Monday", "last Friday".

Calendar fields without a year match any year. Everything is computed in `now`'s time zone.
"""

import calendar
import re
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy

_MONTHS = {name.lower(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS.update(
    {name.lower(): number for number, name in enumerate(calendar.month_abbr) if name}
)
_MONTHS["sept"] = 9
_WEEKDAYS = {name.lower(): number for number, name in enumerate(calendar.day_name)}
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
            "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
            "a couple of": 2, "a few": 3}  # fmt: skip

_MONTH = r"(?P<{}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<{}>(?:19|20)\d\d)"
_COUNT = r"(?P<count>\d+|" + "|".join(sorted(_NUMBERS, key=len, reverse=True)) + r")"
_CALENDAR_DATE = (
    # 9 November, 2022 / the 9th of November
    rf"\b{_DAY.format('d1')}(?:\s+of)?\s+{_MONTH.format('m1')}(?:,?\s+{_YEAR.format('y1')})?\b"
    # November 9, 2022 / Nov 9
    rf"|\b{_MONTH.format('m2')}\s+{_DAY.format('d2')}\b(?:,?\s+{_YEAR.format('y2')}\b)?"
    # 2022-11-09
    r"|\b(?P<y3>(?:19|20)\d\d)-(?P<m3>[01]\d)-(?P<d3>[0-3]\d)\b"
    # November 2022 / in November
    rf"|\b{_MONTH.format('m4')}(?:,?\s+(?:of\s+)?{_YEAR.format('y4')})?\b"
    # 2022
    rf"|\b{_YEAR.format('y5')}\b"
)
_DATE = re.compile(_CALENDAR_DATE, re.IGNORECASE)
_RANGE_START = re.compile(r"\b(?:between|from)\s+(?:the\s+)?$", re.IGNORECASE)
_RANGE_JOIN = re.compile(r"\s*(?:and|to|until|till|-)\s*(?:the\s+)?", re.IGNORECASE)
_RELATIVE = re.compile(
    r"\b(?:(?P<today>today|tonight|this\s+(?:morning|afternoon|evening))"
    r"|(?P<yesterday>yesterday|last\s+night)"
    rf"|(?P<ago>{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+ago)"
    r"|(?P<this>this|last|past)\s+(?P<span>week|month|year)"
    r"|(?:(?P<last_day>last)\s+|on\s+)?(?P<weekday>"
    + "|".join(_WEEKDAYS)
    + r"))\b",
    re.IGNORECASE,
)
# A month on its own is a date only after one of these ("in March", not "we march").
_MONTH_CUE = re.compile(
    r"\b(?:in|during|since|until|till|before|after|by|of|last|this|next|early|late|mid|"
    r"through|throughout|around)\s+$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class TimeWindow:
    """
    A span of time a query refers to: calendar fields (None matches any) or a range.

    Args:
        year, month, day (int, optional): Calendar fields the entry's date must have.
        start, end (datetime, optional): The entry's time must lie in [start, end).
    """

    year: int = None
    month: int = None
    day: int = None
    start: datetime = None
    end: datetime = None


def find_time_references(text, now):
    """
    Args:
        text (str): A query.
        now (datetime): The current time (aware); relative references count from it.

    Returns:
        tuple: `(windows, spans)`: the TimeWindows found and the `(start, end)` character spans
        of the words that named them.
    """
    windows, spans = [], []
    for match in _RELATIVE.finditer(text):
        window = _relative_window(match, now)
        if window is not None:
            windows.append(window)
            spans.append(match.span())
    dates = [
        (match.span(), fields)
        for match in _DATE.finditer(text)
        if not _overlaps(match.span(), spans) and (fields := _date_fields(match, text))
    ]
    dates = _fill_years(dates)
    ranges = _ranges(text, dates, now.tzinfo)
    for span, fields in dates:
        window = ranges.get(span)
        if window is not False:  # False: the end of a range, already in its first date's window
            windows.append(window or TimeWindow(*fields))
        spans.append(span)
    return windows, sorted(spans)


def strip_spans(text, spans):
    """`text` without the characters in `spans` (sorted, non-overlapping)."""
    pieces, position = [], 0
    for start, end in spans:
        pieces.append(text[position:start])
        position = end
    pieces.append(text[position:])
    return " ".join(piece.strip() for piece in pieces if piece.strip())


def window_mask(windows, epochs, utc_offset=0.0):
    """
    Which times lie in any of the windows.

    Args:
        windows (list): TimeWindows.
        epochs (numpy.ndarray): Times in seconds since the epoch (NaN: unknown, never inside).
        utc_offset (float): Seconds east of UTC of the time zone calendar fields are read in.

    Returns:
        numpy.ndarray: Booleans, one per time.
    """
    epochs = numpy.asarray(epochs, dtype=float)
    known = ~numpy.isnan(epochs)
    local_days = numpy.floor((numpy.where(known, epochs, 0.0) + utc_offset) / 86400)
    days = local_days.astype("int64").astype("datetime64[D]")
    months = days.astype("datetime64[M]")
    years = months.astype("datetime64[Y]").astype(int) + 1970
    month_numbers = months.astype(int) % 12 + 1
    day_numbers = (days - months.astype("datetime64[D]")).astype(int) + 1
    inside = numpy.zeros(len(epochs), dtype=bool)
    for window in windows:
        hit = known.copy()
        if window.year is not None:
            hit &= years == window.year
        if window.month is not None:
            hit &= month_numbers == window.month
        if window.day is not None:
            hit &= day_numbers == window.day
        if window.start is not None:
            hit &= epochs >= window.start.timestamp()
        if window.end is not None:
            hit &= epochs < window.end.timestamp()
        inside |= hit
    return inside


# ----------------------------------------------------------------------------------------------


def _overlaps(span, spans):
    return any(start < span[1] and span[0] < end for start, end in spans)


def _date_fields(match, text):
    """(year, month, day) of a calendar-date match, or None when it is not a date."""
    group = match.groupdict()
    for suffix in "12345":
        month_text, day_text, year_text = (group.get(f"{field}{suffix}") for field in "mdy")
        if month_text or year_text:
            break
    year = int(year_text) if year_text else None
    if suffix == "3":
        month, day = int(month_text), int(day_text)
    else:
        month = _MONTHS.get(month_text.lower().rstrip(".")) if month_text else None
        day = int(day_text) if day_text else None
    if day is not None and not 1 <= day <= 31 or month is not None and not 1 <= month <= 12:
        return None
    if month and day is None and year is None:
        # "march", "may", "jan": a month on its own only after a cue word, and in full
        if len(month_text) < 4 or not _MONTH_CUE.search(text[: match.start()]):
            return None
    return year, month, day


def _fill_years(dates):
    """A date with no year takes the year of the next date that has one (a range's end)."""
    filled = []
    for position, (span, (year, month, day)) in enumerate(dates):
        if year is None and day is not None:
            later = [fields[0] for _, fields in dates[position + 1:] if fields[0]]
            year = later[0] if later else None
        filled.append((span, (year, month, day)))
    return filled


def _ranges(text, dates, tzinfo):
    """
    `{span: TimeWindow}` for the first date of "between A and B" / "from A to B" (A's day to
    B's, inclusive) and `{span: False}` for B. Only dates with a year, month and day count.
    """
    ranges = {}
    for (first_span, first_fields), (second_span, second_fields) in zip(dates, dates[1:],
                                                                        strict=False):
        if None in first_fields or None in second_fields:
            continue
        joined = _RANGE_JOIN.fullmatch(text[first_span[1]: second_span[0]])
        if not joined or not _RANGE_START.search(text[: first_span[0]]):
            continue
        start = datetime(*first_fields, tzinfo=tzinfo)
        end = datetime(*second_fields, tzinfo=tzinfo) + timedelta(days=1)
        if end > start:
            ranges[first_span] = TimeWindow(start=start, end=end)
            ranges[second_span] = False
    return ranges


def _relative_window(match, now):
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)
    group = match.groupdict()
    if group["today"]:
        return _day_window(today)
    if group["yesterday"]:
        return _day_window(today - timedelta(days=1))
    if group["ago"]:
        count = group["count"].lower()
        count = int(count) if count.isdigit() else _NUMBERS[count]
        unit = group["unit"].lower()
        if unit == "day":
            # people round: "3 days ago" may be 2 or 4
            return TimeWindow(start=today - timedelta(days=count + 1),
                              end=today - timedelta(days=count - 2))  # fmt: skip
        if unit == "week":
            middle = today - timedelta(days=7 * count)
            return TimeWindow(start=middle - timedelta(days=4), end=middle + timedelta(days=4))
        if unit == "month":
            year, month = _shift_month(now.year, now.month, -count)
            return TimeWindow(year=year, month=month)
        return TimeWindow(year=now.year - count)
    if group["span"]:
        span = group["span"].lower()
        previous = group["this"].lower() != "this"
        if span == "week":
            monday = today - timedelta(days=today.weekday())
            if previous:
                monday -= timedelta(days=7)
            return TimeWindow(start=monday, end=monday + timedelta(days=7))
        if span == "month":
            year, month = _shift_month(now.year, now.month, -1 if previous else 0)
            return TimeWindow(year=year, month=month)
        return TimeWindow(year=now.year - (1 if previous else 0))
    weekday = _WEEKDAYS[group["weekday"].lower()]
    back = (today.weekday() - weekday) % 7
    if group["last_day"] and back == 0:
        back = 7
    return _day_window(today - timedelta(days=back))


def _day_window(day):
    return TimeWindow(start=day, end=day + timedelta(days=1))


def _shift_month(year, month, delta):
    index = year * 12 + (month - 1) + delta
    return index // 12, index % 12 + 1
