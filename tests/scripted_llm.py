"""
A scripted OpenAI-compatible chat-completions server for tests and benchmarks.

It listens on 127.0.0.1 (a random free port unless told otherwise) in a background thread and
answers `POST /v1/chat/completions` (and `/chat/completions`) by replaying a queue of scripted
replies, so the real `openai` client and the real HTTP path are exercised without any network.

    server = ScriptedLLMServer().start()
    server.script(Reply.tool("say", {"message": "hi"}), Reply.error(429, retry_after=0))
    ...  # point an OpenAI client at server.base_url
    server.requests  # every request body, parsed
    server.stop()

Which reply answers a request: the next queued one; when the queue is empty, the `responder`
callable (given the parsed request, returning a `Reply`, a string or None); else the default.

As a pytest plugin (`pytest_plugins = ["scripted_llm"]`) it gives the `llm_server` and
`llm_config` fixtures. From the command line it serves until interrupted:

    python tests/scripted_llm.py --port 8765 --script replies.json --default "Hello."

where replies.json is a list of reply dicts (see `Reply.from_dict`).
"""

import argparse
import collections
import itertools
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

try:  # the fixtures need pytest; the server itself (benchmarks, e2e) does not
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

COMPLETION_PATHS = ("/v1/chat/completions", "/chat/completions")
_ids = itertools.count(1)


class Reply:
    """
    One scripted answer. Build it with the class methods, then optionally chain `.after(s)`.

    Args:
        status (int): HTTP status.
        content (str, optional): Assistant text.
        tool_calls (list, optional): `(name, arguments)` pairs; arguments a dict or raw text.
        headers (dict, optional): Extra response headers.
        body (bytes, optional): A raw body that replaces the generated one.
        usage (tuple, optional): `(prompt_tokens, completion_tokens)`; None leaves usage out.
    """

    def __init__(
        self,
        status=200,
        content=None,
        tool_calls=None,
        headers=None,
        body=None,
        usage=(10, 5),
        content_type="application/json",
    ):
        self.status = status
        self.content = content
        self.tool_calls = list(tool_calls or [])
        self.headers = dict(headers or {})
        self.body = body
        self.usage = usage
        self.content_type = content_type
        self.delay = 0.0

    # -- builders ------------------------------------------------------------------------------

    @classmethod
    def text(cls, content, *, usage=(10, 5)):
        """A plain assistant message."""
        return cls(content=content, usage=usage)

    @classmethod
    def tool(cls, name, arguments=None, *, content=None, usage=(10, 5)):
        """A native tool call; `arguments` is a dict (sent as JSON) or raw text (sent as is)."""
        return cls(content=content, tool_calls=[(name, arguments or {})], usage=usage)

    @classmethod
    def tools(cls, *calls, usage=(10, 5)):
        """Several native tool calls in one reply: `Reply.tools(("a", {}), ("b", {...}))`."""
        return cls(tool_calls=list(calls), usage=usage)

    @classmethod
    def json_tool(cls, name, parameters=None, *, reasoning="", prose=""):
        """A JSON-fallback reply (`{"tool", "parameters", "reasoning"}` text), maybe in prose."""
        payload = json.dumps({"tool": name, "parameters": parameters or {}, "reasoning": reasoning})
        return cls(content=f"{prose}\n```json\n{payload}\n```" if prose else payload)

    @classmethod
    def completion(cls, body):
        """A whole chat.completions body as a server sent it (see `tests/core/agent/corpus`)."""
        return cls(body=json.dumps(body).encode())

    @classmethod
    def served_as(cls, server, name, arguments=None, *, prose=""):
        """
        One tool call in the shape a given server sends it (`SERVER_SHAPES`), e.g.
        `Reply.served_as("vllm-no-parser", "say", {"message": "hi"})`.
        """
        arguments = arguments or {}
        message, finish = SERVER_SHAPES[server](name, arguments, prose)
        body = {
            "id": f"chatcmpl-{next(_ids)}", "object": "chat.completion",
            "created": int(time.time()), "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        return cls.completion(body)

    @classmethod
    def error(cls, status, *, retry_after=None, message=None):
        """An HTTP error in OpenAI's error format, with an optional Retry-After header."""
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        body = json.dumps(
            {"error": {"message": message or f"scripted error {status}", "type": "scripted"}}
        ).encode()
        return cls(status=status, headers=headers, body=body)

    @classmethod
    def garbage(cls, body=b"<html>502 bad gateway... not json", *, content_type="text/html"):
        """A 200 answer whose body is not a chat completion."""
        return cls(
            body=body if isinstance(body, bytes) else body.encode(), content_type=content_type
        )

    @classmethod
    def no_choices(cls):
        """Valid JSON that lacks `choices`."""
        return cls(body=json.dumps({"id": "x", "object": "chat.completion"}).encode())

    @classmethod
    def from_dict(cls, data):
        """
        Build from plain data (the CLI's script file):
        `{"text": ...}`, `{"tool": name, "arguments": {...}}`, `{"json_tool": name,
        "parameters": {...}}`, `{"error": 429, "retry_after": 1}`, `{"garbage": true}`;
        any of them may add `"delay": seconds`.
        """
        if "text" in data:
            reply = cls.text(data["text"])
        elif "tool" in data:
            reply = cls.tool(data["tool"], data.get("arguments"), content=data.get("content"))
        elif "json_tool" in data:
            reply = cls.json_tool(data["json_tool"], data.get("parameters"))
        elif "served_as" in data:
            reply = cls.served_as(data["served_as"], data["name"], data.get("arguments"))
        elif "completion" in data:
            reply = cls.completion(data["completion"])
        elif "error" in data:
            reply = cls.error(int(data["error"]), retry_after=data.get("retry_after"))
        elif data.get("garbage"):
            reply = cls.garbage()
        else:
            raise ValueError(f"unknown scripted reply: {data!r}")
        return reply.after(float(data.get("delay", 0)))

    def after(self, seconds):
        """Wait `seconds` before answering (to provoke client timeouts)."""
        self.delay = seconds
        return self

    # -- rendering -----------------------------------------------------------------------------

    def render(self, request):
        """Return `(status, headers, body bytes)` answering `request`."""
        if self.body is not None:
            return self.status, {"Content-Type": self.content_type, **self.headers}, self.body
        message = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [
                {
                    "id": f"call_{next(_ids)}",
                    "type": "function",
                    "function": {
                        "name": name,
                        "arguments": args if isinstance(args, str) else json.dumps(args),
                    },
                }
                for name, args in self.tool_calls
            ]
        completion = {
            "id": f"chatcmpl-{next(_ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model") or "scripted",
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": "tool_calls" if self.tool_calls else "stop",
                }
            ],
        }
        if self.usage is not None:
            prompt, completion_tokens = self.usage
            completion["usage"] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt + completion_tokens,
            }
        body = json.dumps(completion).encode()
        return self.status, {"Content-Type": "application/json", **self.headers}, body

    def __repr__(self):
        what = self.tool_calls or self.content or self.body
        return f"<Reply {self.status} {what!r}>"


def _native_call(name, arguments, *, call_id=None, encode=json.dumps, openai_fields=True):
    call = {"function": {"name": name, "arguments": encode(arguments)}}
    if openai_fields:
        call = {"id": call_id or f"call_{next(_ids)}", "type": "function", **call}
    return call


def _hermes_text(name, arguments, prose):
    call = json.dumps({"name": name, "arguments": arguments})
    return (prose + "\n" if prose else "") + f"<tool_call>\n{call}\n</tool_call>"


# How each server sends one tool call: `shape(name, arguments, prose) -> (message,
# finish_reason)`. Native shapes follow OpenAI's `ChatCompletionMessageToolCall`; the others
# are what the model's chat template makes it write when the server parses no tool calls.
SERVER_SHAPES = {
    # OpenAI, vLLM with a tool parser, llama.cpp with --jinja: arguments are JSON text
    "openai": lambda n, a, p: ({"role": "assistant", "content": p or None,
                                "tool_calls": [_native_call(n, a)]}, "tool_calls"),
    # Ollama's /v1 endpoint: content is "" next to the calls
    "ollama-openai": lambda n, a, p: ({"role": "assistant", "content": p,
                                       "tool_calls": [_native_call(n, a)]}, "tool_calls"),
    # Ollama's native /api/chat message passed through: arguments an object, no id or type
    "ollama-native": lambda n, a, p: (
        {"role": "assistant", "content": p,
         "tool_calls": [_native_call(n, a, encode=dict, openai_fields=False)]}, "stop"),
    # LM Studio, sometimes: the arguments JSON encoded twice
    "lm-studio-double": lambda n, a, p: (
        {"role": "assistant", "content": None,
         "tool_calls": [_native_call(n, a, encode=lambda x: json.dumps(json.dumps(x)))]},
        "tool_calls"),
    # vLLM without --enable-auto-tool-choice, llama.cpp without --jinja (Hermes/Qwen template)
    "vllm-no-parser": lambda n, a, p: ({"role": "assistant", "tool_calls": [],
                                        "content": _hermes_text(n, a, p)}, "stop"),
    "llama.cpp-no-jinja": lambda n, a, p: ({"role": "assistant",
                                            "content": _hermes_text(n, a, p)}, "stop"),
    # Llama 3.1 JSON tool calling written as text
    "llama3-json": lambda n, a, p: (
        {"role": "assistant", "content": json.dumps({"name": n, "parameters": a})}, "stop"),
    # Mistral's template: [TOOL_CALLS] then a JSON list
    "mistral": lambda n, a, p: (
        {"role": "assistant",
         "content": "[TOOL_CALLS] " + json.dumps([{"name": n, "arguments": a}])}, "stop"),
    # a JSON action in a ```json fence
    "fenced-json": lambda n, a, p: (
        {"role": "assistant", "content": (p + "\n" if p else "") + "```json\n"
         + json.dumps({"name": n, "arguments": a}) + "\n```"}, "stop"),
}


class _Handler(BaseHTTPRequestHandler):
    server_version = "ScriptedLLM/1.0"

    def log_message(self, format, *args):  # keep test output quiet
        return

    def _send(self, status, headers, body):
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path.rstrip("/") in ("/v1/models", "/models"):
            body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
            self._send(200, {"Content-Type": "application/json"}, body.encode())
        else:
            self._send(404, {"Content-Type": "application/json"}, b'{"error": "not found"}')

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.split("?")[0] not in COMPLETION_PATHS:
            self._send(404, {"Content-Type": "application/json"}, b'{"error": "not found"}')
            return
        try:
            request = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"Content-Type": "application/json"}, b'{"error": "bad json"}')
            return
        reply = self.server.owner._next_reply(request, dict(self.headers))
        if reply.delay:
            time.sleep(reply.delay)
        try:
            self._send(*reply.render(request))
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
            pass


class ScriptedLLMServer:
    """
    The scripted endpoint.

    Args:
        replies (iterable, optional): Replies queued at start.
        responder (callable, optional): `responder(request) -> Reply | str | None`, used when
            the queue is empty.
        default (Reply or str, optional): The answer when nothing else applies.
        host (str): Interface to bind (loopback by default).
        port (int): Port; 0 picks a free one.
    """

    def __init__(self, replies=(), responder=None, default=None, host="127.0.0.1", port=0):
        self.host = host
        self.port = port
        self.responder = responder
        self.default = default if default is not None else Reply.text("Hmm.")
        self.requests = []
        self.headers = []  # each request's headers, names lower-cased
        self._queue = collections.deque(self._coerce(reply) for reply in replies)
        self._lock = threading.Lock()
        self._httpd = None
        self._thread = None

    @staticmethod
    def _coerce(reply):
        if reply is None or isinstance(reply, Reply):
            return reply
        if isinstance(reply, str):
            return Reply.text(reply)
        if isinstance(reply, dict):
            return Reply.from_dict(reply)
        raise TypeError(f"not a scripted reply: {reply!r}")

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self):
        """Bind and serve in a daemon thread. Returns self."""
        self._httpd = ThreadingHTTPServer((self.host, self.port), _Handler)
        self._httpd.daemon_threads = True
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            # a short poll interval keeps stop() (and so each test) fast
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="scripted-llm",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self):
        """Stop serving and free the port. Safe to call twice."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join(timeout=5)
            self._httpd = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    @property
    def base_url(self):
        """The OpenAI-style base URL, ending in /v1."""
        return f"http://{self.host}:{self.port}/v1"

    # -- scripting -----------------------------------------------------------------------------

    def script(self, *replies):
        """Queue more replies (Reply objects, strings for text, or dicts). Returns self."""
        with self._lock:
            self._queue.extend(self._coerce(reply) for reply in replies)
        return self

    def pending(self):
        """How many queued replies are still unused."""
        with self._lock:
            return len(self._queue)

    def reset(self):
        """Forget queued replies and recorded requests."""
        with self._lock:
            self._queue.clear()
            self.requests.clear()
            self.headers.clear()

    @property
    def last_request(self):
        return self.requests[-1] if self.requests else None

    def _next_reply(self, request, headers):
        with self._lock:
            self.requests.append(request)
            self.headers.append({key.lower(): value for key, value in headers.items()})
            if self._queue:
                return self._queue.popleft()
        if self.responder is not None:
            reply = self._coerce(self.responder(request))
            if reply is not None:
                return reply
        return self._coerce(self.default)


# ----------------------------------------------------------------------------------------------
# Helpers for tests that drive the LLM client and the ReAct loop without a running reactor


def sync_runner(func, *args, **kwargs):
    """
    A `runner` for `LLMClient` that makes the blocking call right here, in the test's thread
    (the scripted server answers from its own thread), and returns a fired Deferred.
    """
    from twisted.internet import defer

    return defer.maybeDeferred(func, *args, **kwargs)


def drive(deferred, clock=None, max_steps=100):
    """
    Run a Deferred to completion by advancing a `twisted.internet.task.Clock` through its
    delayed calls (backoff waits), then return its result or raise its exception.

    Raises:
        AssertionError: If it cannot complete (nothing scheduled and not fired).
    """
    results = []
    deferred.addBoth(results.append)
    for _ in range(max_steps):
        # not `deferred.called`: that is also true while it waits on a chained Deferred
        if results:
            break
        calls = clock.getDelayedCalls() if clock is not None else []
        if not calls:
            break
        next_time = min(call.getTime() for call in calls)
        clock.advance(max(0.0, next_time - clock.seconds()))
    assert results, "the Deferred never fired"
    outcome = results[0]
    from twisted.python.failure import Failure

    if isinstance(outcome, Failure):
        outcome.raiseException()
    return outcome


class FakeWorld:
    """
    A `WorldPort` that records what the assistant does.

    Args:
        present (list[dict], optional): `{"id", "name", "is_player"}` for each one here.
        location (dict, optional): What `describe_location` returns.
    """

    def __init__(self, present=None, location=None):
        self.people = list(present or [{"id": "#2", "name": "Bob", "is_player": True}])
        self.location = location or {
            "name": "The Tavern",
            "description": "A warm room smelling of bread.",
            "exits": ["north", "out"],
            "objects": ["a table"],
        }
        self.said, self.emotes, self.whispers = [], [], []
        self.looks = 0

    def say(self, text):
        self.said.append(text)

    def emote(self, text):
        self.emotes.append(text)

    def whisper(self, target, text):
        names = {p["name"].lower() for p in self.people} | {str(p["id"]) for p in self.people}
        if target.lower() not in names:
            return f"nobody called '{target}' is here"
        self.whispers.append((target, text))
        return None

    def tell(self, target, text):
        """An out-of-character message to one character (`self.told`: (target, text))."""
        self.told = [*getattr(self, "told", []), (target, text)]

    def describe_location(self):
        self.looks += 1
        return dict(self.location)

    def present(self):
        return [dict(person) for person in self.people]

    @property
    def actions(self):
        """Everything visible it did, in kind order: said, emotes, whispers."""
        return self.said + self.emotes + [text for _, text in self.whispers]


# ----------------------------------------------------------------------------------------------
# pytest fixtures (loaded with `pytest_plugins = ["scripted_llm"]`)


def _fixture(func):
    return pytest.fixture(func) if pytest is not None else func


@_fixture
def llm_server():
    """A running ScriptedLLMServer, stopped after the test."""
    server = ScriptedLLMServer().start()
    try:
        yield server
    finally:
        server.stop()


@_fixture
def llm_config(llm_server):
    """The `llm` settings subtree pointing at `llm_server`, with fast backoff."""
    from ai_assistant.plumbing.settings import DEFAULTS

    config = json.loads(json.dumps(DEFAULTS["llm"]))
    config.update(
        base_url=llm_server.base_url,
        api_key="test-key",
        model="scripted",
        timeout=5.0,
        backoff_base=0.01,
        backoff_max=0.05,
    )
    return config


# ----------------------------------------------------------------------------------------------
# command line


def main(argv=None):
    parser = argparse.ArgumentParser(description="Serve scripted OpenAI-compatible replies.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", help="JSON file with a list of reply dicts")
    parser.add_argument("--default", default="Hmm.", help="text answered when the queue is empty")
    args = parser.parse_args(argv)
    replies = []
    if args.script:
        with open(args.script, encoding="utf-8") as handle:
            replies = json.load(handle)
    server = ScriptedLLMServer(replies, default=args.default, host=args.host, port=args.port)
    server.start()
    print(f"scripted LLM serving at {server.base_url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
