"""
Time references in a query: the days, months or years a question is about.

"What did Brannoc forge on 9 November, 2022?", "Where were you in April?", "What happened
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
  "this/last month", "this/last year", "on Monday", "last Friday";
- periods anchored on one of those: "before June 2023", "after 9 May", "since last week",
  "as of December 2023", "by March", "until 2022", "prior to last month", "up to yesterday"
  (`PERIOD_CUE`). The window is the period, not the anchor: "as of December 2023" is
  everything until the end of December 2023 ("what did the forge sell as of December?" is
  answered by the last word on it before then, whenever that was), "before June" everything
  until June began, "after 9 May" and "since May" everything from the end / the start of the
  anchor on. An anchor without a year is its latest occurrence not after now.

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


# The words that make a date the edge of a period: the period ends where the anchor begins
# ("before"), where it ends ("as of", "by", "until"), or starts where it ends ("after") or
# where it begins ("since"). Not "from": "the letter from 2019" is about 2019.
PERIOD_CUE = re.compile(
    r"\b(?:(?P<before>before|prior\s+to|earlier\s+than)"
    r"|(?P<upto>as\s+of|by|until|till|up\s+(?:to|until))"
    r"|(?P<after>after|later\s+than)"
    r"|(?P<since>since))"
    r"\s+(?:the\s+(?:end|start|beginning)\s+of\s+)?(?:the\s+)?$",
    re.IGNORECASE,
)
# "two weeks before", "the day after", "last weekend before": a time that far from the anchor,
# not the period on that side of it.
_OFFSET = re.compile(
    rf"(?:\b{_COUNT}|\b(?:the|last))\s+(?P<unit>day|weekend|week|month|year)s?\s+$",
    re.IGNORECASE,
)
_UNIT_DAYS = {"day": 1, "week": 7, "weekend": 7, "month": 30, "year": 365}


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
    found = []  # (span, window)
    for match in _RELATIVE.finditer(text):
        window = _relative_window(match, now)
        if window is not None:
            found.append((match.span(), window))
    relative = {span for span, _ in found}
    dates = [
        (match.span(), fields)
        for match in _DATE.finditer(text)
        if not _overlaps(match.span(), relative) and (fields := _date_fields(match, text))
    ]
    dates = _fill_years(dates)
    ranges = _ranges(text, dates, now.tzinfo)
    for span, fields in dates:
        window = ranges.get(span)
        # False: the end of a range, already in its first date's window
        found.append((span, False if window is False else window or TimeWindow(*fields)))
    windows, spans = [], []
    for span, window in sorted(found, key=lambda pair: pair[0]):
        if window is not False and span not in ranges:
            span, window = _period(text, span, window, now, span in relative)
        if window is not False:
            windows.append(window)
        spans.append(span)
    return windows, spans


def _period(text, span, window, now, relative=False):
    """
    `(span, window)`: the period a date is the edge of ("before June", `PERIOD_CUE`), its span
    widened to the cue's words; the date itself when no cue precedes it. "by" before a time
    relative to now is a verb's ("who came by last night"), not a period's.
    """
    cue = PERIOD_CUE.search(text[: span[0]])
    if cue is None or window.start is None and window.month is None and window.year is None:
        return span, window
    if relative and cue.group(0).strip().lower().startswith("by"):
        return span, window
    start, end = _extent(window, now)
    if start is None:
        return span, window
    kind = cue.lastgroup
    widened = (cue.start(), span[1])
    offset = _OFFSET.search(text[: cue.start()]) if kind in ("before", "after") else None
    if offset is not None:
        return (offset.start(), span[1]), _offset_window(offset, kind, start, end)
    if kind == "before":
        return widened, TimeWindow(end=start)
    if kind == "upto":
        return widened, TimeWindow(end=end)
    if kind == "after":
        return widened, TimeWindow(start=end)
    return widened, TimeWindow(start=start)  # since


def _offset_window(offset, kind, start, end):
    """The window "two weeks before" / "the day after" an anchor `[start, end)` names."""
    unit = timedelta(days=_UNIT_DAYS[offset.group("unit").lower()])
    count = (offset.group("count") or "").lower()
    count = (int(count) if count.isdigit() else _NUMBERS[count]) if count else 1
    # people round, as with "two weeks ago": half a unit either side (a day at least)
    slack = timedelta(days=(unit.days + 1) // 2 if offset.group("count") else 0)
    if kind == "before":
        # what happened then is told then or later, up to the anchor ("the week before 3
        # August" is often "last week, ..." said on 3 August): from the time to the anchor
        return TimeWindow(start=start - count * unit - slack, end=end)
    if not offset.group("count"):  # "the week after": the whole unit after the anchor
        return TimeWindow(start=end, end=end + unit)
    middle = start + count * unit
    return TimeWindow(start=middle - slack, end=middle + slack + timedelta(days=1))


def _extent(window, now):
    """`(start, end)` of a window as times in `now`'s zone; a date without a year is its
    latest occurrence not after now. `(None, None)` when it has no extent (a day alone)."""
    if window.start is not None or window.end is not None:
        return window.start, window.end
    zone = now.tzinfo
    month, day = window.month, window.day
    year = window.year
    if year is None:
        year = now.year
        if month is not None and (month, day or 1) > (now.month, now.day):
            year -= 1
    if month is None:
        return datetime(year, 1, 1, tzinfo=zone), datetime(year + 1, 1, 1, tzinfo=zone)
    if day is None:
        following = _shift_month(year, month, 1)
        return (datetime(year, month, 1, tzinfo=zone),
                datetime(*following, 1, tzinfo=zone))  # fmt: skip
    try:
        start = datetime(year, month, day, tzinfo=zone)
    except ValueError:  # "31 June"
        return None, None
    return start, start + timedelta(days=1)


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
