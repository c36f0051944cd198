"""
What a setting's value may be: reading a value as a setting's type, and saying in words what a
setting accepts. The table of types and ranges itself is `plumbing/settings.py` (`RANGES`).
"""

from collections.abc import Mapping

_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


class SettingError(ValueError):
    """A value a setting does not accept; the message names what it accepts."""


def describe(kind, limits=None, *, nullable=False):
    """
    What a setting of type `kind` with `limits` accepts, in words.

    Args:
        kind (type): bool, int, float, str or dict.
        limits (tuple, optional): `(low, high)` for a number, the choices for a string.
        nullable (bool): Whether null ("unset") is accepted too.

    Returns:
        str: E.g. "a whole number from 1 to 86400", "true or false", "one of score, rrf".
    """
    if kind is bool:
        text = "true or false"
    elif kind is int or kind is float:
        noun = "a whole number" if kind is int else "a number"
        text = f"{noun} from {limits[0]} to {limits[1]}" if limits else noun
    elif kind is str and limits:
        text = "one of " + ", ".join(limits)
    elif kind is dict:
        text = "a JSON object"
    else:
        text = "text"
    return text + (", or null" if nullable else "")


def coerce(kind, value):
    """
    `value` read as `kind`: "5", 5 and 5.0 are the int 5; "true" is True; 4 is the text "4".

    Raises:
        TypeError, ValueError: When `value` cannot be read as `kind`.
    """
    if kind is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise TypeError("not a boolean")
    if kind is int or kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError("not a number")
        number = float(value)  # "banana" raises ValueError
        if number != number or number in (float("inf"), float("-inf")):
            raise ValueError("not a finite number")
        if kind is int:
            if not number.is_integer():
                raise ValueError("not a whole number")
            return int(number)
        return number
    if kind is str:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise TypeError("not text")
        return str(value)
    if kind is dict and isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not a {kind.__name__}")
