"""
The rehearsal of a model client's first request: one chat completion through the SDK, answered
inside this process, so that the first real request after a start pays only for the network.

A fresh process pays for much at its first request that no import does: the SDK imports its
chat resources and builds their response models when `client.chat` is first read, validates the
first request's parameters and the first answer with models it builds then, and fills its
caches. The warm-up (`agent.warmup`) runs the rehearsal once, off the reactor.
"""

import logging
import sys
import threading

from ai_assistant.plumbing.llm import parse_completion

# Reserved, never resolvable (RFC 2606): were the in-process transport ever bypassed, the
# rehearsal could reach no server.
REHEARSAL_URL = "http://rehearsal.invalid/v1"
_REHEARSAL_ANSWER = {
    "id": "chatcmpl-rehearsal",
    "object": "chat.completion",
    "created": 0,
    "model": "rehearsal",
    "choices": [{
        "index": 0,
        "finish_reason": "tool_calls",
        "message": {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "call_rehearsal", "type": "function",
                            "function": {"name": "say", "arguments": '{"message": "Hello."}'}}],
        },
    }],
    "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
}


def rehearse_completion(tools=()):
    """
    One chat completion through the SDK, answered inside this process: nothing is sent (the
    SDK's HTTP client gets an in-process transport) and nothing is written.

    A fresh process pays for much at its first request that no import does: the SDK imports
    its chat resources and builds their response models when `client.chat` is first read,
    validates the first request's parameters and the first answer with models it builds
    then, and fills its caches. Run once off the reactor, it leaves the first real request
    only the network (issue 34).

    Args:
        tools (iterable of dict): Native tool specs to send, as a reply sends them.

    Returns:
        LLMReply: The parsed rehearsal answer (a `say` call).
    """
    import openai

    from ai_assistant.plumbing.llm_resilience import http_logger_names

    http = _http_library(openai)
    transport = http.MockTransport(
        lambda request: http.Response(200, json=_REHEARSAL_ANSWER, request=request))
    sdk = openai.OpenAI(base_url=REHEARSAL_URL, api_key="rehearsal", max_retries=0,
                        http_client=openai.DefaultHttpxClient(transport=transport))
    request = {
        "model": "rehearsal",
        "messages": [
            {"role": "system", "content": "You are rehearsing."},
            {"role": "user", "content": "Hello?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_0", "type": "function",
                 "function": {"name": "look", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "call_0", "content": '{"success": true}'},
        ],
        "temperature": 0.7,
        "max_tokens": 64,
        "timeout": 5.0,
    }
    if tools:
        request["tools"] = list(tools)
    with _unlogged(http_logger_names()):
        try:
            return parse_completion(sdk.chat.completions.create(**request), request)
        finally:
            sdk.close()


def _http_library(openai):
    """The HTTP library the installed SDK sends with (`httpx`, or `httpx2` in later ones)."""
    base = next(cls for cls in openai.DefaultHttpxClient.__mro__
                if not cls.__module__.startswith("openai"))
    return sys.modules[base.__module__.split(".", 1)[0]]


class _unlogged:
    """
    Drop what the HTTP loggers `names` (and theirs below) log from this thread while inside:
    the rehearsal is not a request, and `llm.log_requests` may have them at INFO.
    """

    def __init__(self, names):
        self.loggers = [logging.getLogger(name) for name in names]
        self.loggers += [logging.getLogger(name) for name in list(logging.root.manager.loggerDict)
                         if name.split(".", 1)[0] in names]
        self.thread = threading.get_ident()

    def filter(self, record):
        return record.thread != self.thread

    def __enter__(self):
        for logger in self.loggers:
            logger.addFilter(self)
        return self

    def __exit__(self, *exc):
        for logger in self.loggers:
            logger.removeFilter(self)
