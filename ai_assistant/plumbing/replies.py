"""
JSON in a model's reply: bare, in a code fence, or with prose around it.
"""

import json
import re

from ai_assistant.plumbing.ports import LLMBadResponse

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def find_json(text, *, expect=None):
    """
    Like `parse_json_reply`, for callers that treat "no JSON" as an ordinary answer.

    Returns:
        dict or list or None: The first JSON value found, or None.
    """
    try:
        return parse_json_reply(text, expect=expect)
    except LLMBadResponse:
        return None


def parse_json_reply(text, *, expect=None):
    """
    Pull a JSON object or array out of a model's reply: bare JSON, JSON in a code fence, or
    JSON with prose around it.

    Args:
        text (str): The reply.
        expect (type, optional): `dict` or `list` to accept only that kind.

    Returns:
        dict or list: The first JSON value found.

    Raises:
        LLMBadResponse: When there is none.
    """
    if not text or not str(text).strip():
        raise LLMBadResponse("empty reply where JSON was expected")
    text = str(text).strip()
    kinds = (expect,) if expect else (dict, list)
    candidates = [text] + [match.group(1).strip() for match in _FENCE.finditer(text)]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, kinds):
            return value
    decoder = json.JSONDecoder()
    for index, char in enumerate(text):
        if char not in "{[":
            continue
        try:
            value, _ = decoder.raw_decode(text, index)
        except json.JSONDecodeError:
            continue
        if isinstance(value, kinds):
            return value
    raise LLMBadResponse(f"no JSON {'/'.join(k.__name__ for k in kinds)} in reply: {text[:80]!r}")
