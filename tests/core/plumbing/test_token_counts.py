"""
Token counts of short texts are kept (`plumbing.tokens`): a history line's role, its
speaker's name and a short line recur, and each count the encoder makes hands the
interpreter lock over and back on the reactor.
"""

import uuid
from unittest.mock import patch

from ai_assistant.plumbing import tokens


def test_a_short_text_is_encoded_once_and_a_long_one_each_time():
    encoding = tokens._get_encoding()
    short = f"Ada the librarian {uuid.uuid4().hex[:8]}"
    long = "The ferry leaves at dawn, and the miller's cart waits by the bridge. " * 3
    with patch.object(tokens, "_encode_count", wraps=tokens._encode_count) as encoded:
        assert tokens.count_tokens(short) == tokens.count_tokens(short) == len(
            encoding.encode(short))
        assert encoded.call_count == 1
        assert tokens.count_tokens(long) == tokens.count_tokens(long) == len(
            encoding.encode(long))
        assert encoded.call_count == 3


def test_a_kept_count_is_never_another_encoding_s():
    class Hundreds:  # a stand-in encoding: a hundred tokens a text
        def encode(self, text, disallowed_special=()):
            return [0] * 100

    text = f"Bram {uuid.uuid4().hex[:6]}"
    real = tokens.count_tokens(text)
    assert real < 100
    with patch.object(tokens, "_encoding", Hundreds()):
        assert tokens.count_tokens(text) == 100
    assert tokens.count_tokens(text) == real
