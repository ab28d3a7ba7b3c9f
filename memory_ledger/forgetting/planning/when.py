"""Time expressions in a forget request, as a window of recording times.

"Yesterday", "in March", "上周", "三月" are read against the request's own clock and
time zone (a user's "yesterday" ends at their midnight, not UTC's). A month without a
year is the latest one that has begun: "in March", said in November, is this year's
March; said in February, last year's. The window is half open, [since, until).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo

MONTHS_EN = {
    "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3, "april": 4,
    "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7, "august": 8, "aug": 8,
    "september": 9, "sep": 9, "sept": 9, "october": 10, "oct": 10, "november": 11, "nov": 11,
    "december": 12, "dec": 12,
}  # fmt: skip
ZH_DIGITS = {
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
WEEKDAYS_EN = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
WEEKDAYS_ZH = "一二三四五六日"


@dataclass(frozen=True)
class Window:
    """Recording times from `since` (inclusive) to `until` (exclusive), and the words."""

    since: datetime
    until: datetime
    said: str


def _zh_number(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    if text == "十":
        return 10
    if text.startswith("十"):
        return 10 + ZH_DIGITS.get(text[1:], 0)
    if text.endswith("十"):
        return ZH_DIGITS.get(text[:-1], 0) * 10
    if "十" in text:
        tens, ones = text.split("十", 1)
        return ZH_DIGITS.get(tens, 0) * 10 + ZH_DIGITS.get(ones, 0)
    return ZH_DIGITS.get(text)


def _day(d: date, zone: tzinfo) -> datetime:
    return datetime.combine(d, time(0), zone)


def _month(year: int, month: int, zone: tzinfo) -> tuple[datetime, datetime]:
    start = _day(date(year, month, 1), zone)
    end = _day(date(year + (month == 12), month % 12 + 1, 1), zone)
    return start, end


def _latest_month(
    month: int, today: date, year: int | None, zone: tzinfo
) -> tuple[datetime, datetime]:
    if year is None:
        year = today.year if month <= today.month else today.year - 1
    return _month(year, month, zone)


_MONTH_NAMES = "|".join(sorted(MONTHS_EN, key=len, reverse=True))
_EN_MONTH = re.compile(
    rf"\b(?:in|during|from|since|back in|last)?\s*({_MONTH_NAMES})\b(?:\s+(\d{{4}}))?"
)
_ZH_MONTH = re.compile(
    r"(?:(\d{4})年|(去年|今年))?([一二三四五六七八九十]{1,2}|\d{1,2})月份?(?!\d*[日号])"
)
_EN_AGO = re.compile(r"\b(\d+|a|one|two|three|four|five|six|seven)\s+(day|week|month)s?\s+ago\b")
_ZH_AGO = re.compile(r"([一二三四五六七八九十两]{1,3}|\d+)\s*(天|周|个星期|星期|个月)前")
_EN_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}
_YEAR = re.compile(r"\b(?:in|during)\s+(\d{4})\b|(\d{4})年(?!\d{0,2}月)")


def window_in(text: str, now: datetime, zone: tzinfo) -> Window | None:
    """The one time window `text` names, or None. `text` is normalised (lexicon.normalise)."""
    local = now.astimezone(zone)
    today = local.date()
    midnight = _day(today, zone)
    simple = {
        "day before yesterday": (midnight - timedelta(days=2), midnight - timedelta(days=1)),
        "前天": (midnight - timedelta(days=2), midnight - timedelta(days=1)),
        "yesterday": (midnight - timedelta(days=1), midnight),
        "昨天": (midnight - timedelta(days=1), midnight),
        "昨晚": (midnight - timedelta(hours=6), midnight),
        "last night": (midnight - timedelta(hours=6), midnight),
        "today": (midnight, midnight + timedelta(days=1)),
        "今天": (midnight, midnight + timedelta(days=1)),
        "this morning": (midnight, midnight + timedelta(hours=12)),
        "今天早上": (midnight, midnight + timedelta(hours=12)),
        "今早": (midnight, midnight + timedelta(hours=12)),
        "this week": (midnight - timedelta(days=today.weekday()), midnight + timedelta(days=1)),
        "这周": (midnight - timedelta(days=today.weekday()), midnight + timedelta(days=1)),
        "本周": (midnight - timedelta(days=today.weekday()), midnight + timedelta(days=1)),
        "last week": (
            midnight - timedelta(days=today.weekday() + 7),
            midnight - timedelta(days=today.weekday()),
        ),
        "上周": (
            midnight - timedelta(days=today.weekday() + 7),
            midnight - timedelta(days=today.weekday()),
        ),
        "上个星期": (
            midnight - timedelta(days=today.weekday() + 7),
            midnight - timedelta(days=today.weekday()),
        ),
        "this month": (_day(today.replace(day=1), zone), midnight + timedelta(days=1)),
        "这个月": (_day(today.replace(day=1), zone), midnight + timedelta(days=1)),
        "本月": (_day(today.replace(day=1), zone), midnight + timedelta(days=1)),
        "last month": _month(today.year - (today.month == 1), (today.month - 2) % 12 + 1, zone),
        "上个月": _month(today.year - (today.month == 1), (today.month - 2) % 12 + 1, zone),
        "this year": (_day(date(today.year, 1, 1), zone), midnight + timedelta(days=1)),
        "今年": (_day(date(today.year, 1, 1), zone), midnight + timedelta(days=1)),
        "last year": (_day(date(today.year - 1, 1, 1), zone), _day(date(today.year, 1, 1), zone)),
        "去年": (_day(date(today.year - 1, 1, 1), zone), _day(date(today.year, 1, 1), zone)),
    }
    for words in sorted(simple, key=len, reverse=True):
        pattern = rf"(?<![\w]){re.escape(words)}(?![\w])" if words.isascii() else re.escape(words)
        if re.search(pattern, text):
            if words in ("今年", "去年") and _ZH_MONTH.search(text):
                break  # "去年三月": the month, with its year
            since, until = simple[words]
            return Window(since, until, words)
    for i, name in enumerate(WEEKDAYS_EN):
        if re.search(rf"\b(?:on|last)\s+{name}\b", text):
            return _weekday(i, today, zone, name)
    m = re.search(r"(?:上周|上个?星期|上礼拜)([一二三四五六日天])", text)
    if m:
        back = today.weekday() + 7 - WEEKDAYS_ZH.index(m.group(1).replace("天", "日"))
        start = midnight - timedelta(days=back)
        return Window(start, start + timedelta(days=1), m.group(0))
    m = re.search(r"(?:这周|本周|周|星期|礼拜)([一二三四五六日天])", text)
    if m:
        return _weekday(WEEKDAYS_ZH.index(m.group(1).replace("天", "日")), today, zone, m.group(0))
    m = _EN_AGO.search(text) or _ZH_AGO.search(text)
    if m:
        amount = _EN_WORDS.get(m.group(1)) or _zh_number(m.group(1)) or 1
        unit = {"天": "day", "周": "week", "个星期": "week", "星期": "week", "个月": "month"}.get(
            m.group(2), m.group(2)
        )
        days = {"day": 1, "week": 7, "month": 30}[unit] * amount
        span = {"day": 1, "week": 7, "month": 30}[unit]
        start = midnight - timedelta(days=days)
        return Window(start, start + timedelta(days=span), m.group(0))
    m = _EN_MONTH.search(text)
    if m and not (
        m.group(1) == "may" and not re.search(r"\b(?:in|during|since|back in|last)\s+may\b", text)
    ):
        year = int(m.group(2)) if m.group(2) else None
        since, until = _latest_month(MONTHS_EN[m.group(1)], today, year, zone)
        return Window(since, until, m.group(0).strip())
    m = _ZH_MONTH.search(text)
    if m:
        month = _zh_number(m.group(3))
        if month and 1 <= month <= 12:
            year = int(m.group(1)) if m.group(1) else None
            if m.group(2):
                year = today.year - (m.group(2) == "去年")
            since, until = _latest_month(month, today, year, zone)
            return Window(since, until, m.group(0))
    m = _YEAR.search(text)
    if m:
        year = int(m.group(1) or m.group(2))
        return Window(_day(date(year, 1, 1), zone), _day(date(year + 1, 1, 1), zone), m.group(0))
    return None


def _weekday(index: int, today: date, zone: tzinfo, said: str) -> Window:
    back = (today.weekday() - index) % 7 or 7
    start = _day(today - timedelta(days=back), zone)
    return Window(start, start + timedelta(days=1), said)
