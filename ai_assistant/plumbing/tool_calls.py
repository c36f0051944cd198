"""
Tool calls in every dialect a model server speaks.

Servers and models disagree on how a tool call reaches the client:

- **native** (`message.tool_calls`, OpenAI's shape): `function.arguments` is JSON text
  (OpenAI, vLLM with a tool parser, llama.cpp with `--jinja`, LM Studio, Ollama's `/v1`
  endpoint) - sometimes JSON text holding JSON text again (double-encoded), and an object
  where the server passes Ollama's native `/api/chat` message through;
- **in the content**, when the server runs without a tool parser (vLLM without
  `--enable-auto-tool-choice`, llama.cpp without `--jinja`, raw chat templates):
  Hermes/Qwen `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; Llama 3.x
  `{"name": ..., "parameters": {...}}` (bare or after `<|python_tag|>`) and
  `<function=name>{...}</function>`; Llama 3.2's pythonic `[name(key="value")]`; Mistral
  `[TOOL_CALLS] [{"name": ..., "arguments": {...}}]` (and the newer `[TOOL_CALLS]name[ARGS]{...}`);
  a JSON object in a ```json fence; this contrib's JSON protocol
  `{"tool": ..., "parameters": {...}, "reasoning": ...}`.

`read_text_calls` finds the calls in a reply's text and returns what is left to speak, and
whether markup that was meant as a call could not be read (it must then never be spoken);
`decode_arguments` turns any arguments value into a dict.
"""

import ast
import json
import re
from dataclasses import dataclass, field

from ai_assistant.plumbing.ports import ToolCall

NAME_KEYS = ("name", "tool", "tool_name", "function", "action")
ARGUMENT_KEYS = ("arguments", "parameters", "args", "params", "input")

# Reasoning a model thinks aloud (Qwen3, DeepSeek-R1 and their distillations): never spoken.
_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.DOTALL | re.IGNORECASE)
_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FUNCTION_TAG = re.compile(r"<function=([\w.\-]+)>\s*(.*?)\s*(?:</function>|$)", re.DOTALL)
_PYTHON_TAG = "<|python_tag|>"
_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_ARGS = re.compile(r"\[TOOL_CALLS\]\s*([\w.\-]+)\s*\[ARGS\]\s*", re.DOTALL)
_FENCE = re.compile(r"```(?:json|JSON|tool_call|tool_code)?\s*\n?(.*?)```", re.DOTALL)
# Markers that only ever mean "this is a tool call": text holding one is never spoken.
CALL_MARKERS = ("<tool_call>", "</tool_call>", "<function=", _PYTHON_TAG, _MISTRAL, "[ARGS]")


@dataclass
class TextCalls:
    """
    What a reply's text holds.

    Attributes:
        calls (list[ToolCall]): The calls found, in order.
        text (str): What is left to speak (markup and reasoning removed).
        error (str or None): Why markup meant as a call could not be read.
        dialect (str or None): Which shape the calls came in.
    """

    calls: list = field(default_factory=list)
    text: str = ""
    error: str | None = None
    dialect: str | None = None


def decode_arguments(raw):
    """
    Any arguments value as a dict.

    Args:
        raw: A dict, JSON text, JSON text holding JSON text (double-encoded), None or "".

    Returns:
        tuple: `(dict, None)` or `(None, error message)`.
    """
    value = raw
    for _ in range(3):  # JSON in JSON in JSON is as deep as servers go
        if value is None or (isinstance(value, str) and not value.strip()):
            return {}, None
        if isinstance(value, dict):
            return dict(value), None
        if not isinstance(value, str):
            return None, f"arguments must be a JSON object, not {type(value).__name__}"
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            return None, f"arguments are not valid JSON ({err.msg} at char {err.pos})"
    if isinstance(value, dict):
        return dict(value), None
    return None, 'arguments must be a JSON object like {"key": "value"}'


def call_from_object(data, call_id=""):
    """
    A `ToolCall` from one decoded JSON object, whichever keys name the tool and its arguments.

    Returns:
        ToolCall or None: None when the object names no tool.
    """
    if not isinstance(data, dict):
        return None
    if isinstance(data.get("function"), dict):  # OpenAI's shape, written into the content
        return call_from_object(data["function"], str(data.get("id") or call_id))
    name = next((data[key] for key in NAME_KEYS if isinstance(data.get(key), str)), None)
    if not name or not name.strip():
        return None
    arguments = next((data[key] for key in ARGUMENT_KEYS if key in data), {})
    if isinstance(arguments, dict) and isinstance(data.get("reasoning"), str):
        arguments = {**arguments, "reasoning": data["reasoning"]}
    return ToolCall(name=name.strip(), arguments=arguments, id=call_id)


def _calls_from_json(text, call_id):
    """The calls in JSON text (an object, or a list of objects); None when it is not JSON."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None
    items = value if isinstance(value, list) else [value]
    calls = [call_from_object(item, f"{call_id}_{n}") for n, item in enumerate(items)]
    return calls if calls and all(calls) else []


def _first_json(text):
    """The first JSON value in `text` and where it ends, or (None, 0)."""
    decoder = json.JSONDecoder()
    start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
    if start < 0:
        return None, 0
    try:
        value, end = decoder.raw_decode(text, start)
    except json.JSONDecodeError:
        return None, 0
    return value, end


def _hermes(text):
    matches = list(_HERMES.finditer(text))
    if not matches:
        return None
    calls = []
    for number, match in enumerate(matches):
        found = _calls_from_json(match.group(1), f"text_call_{number}")
        if not found:
            return TextCalls(error="a <tool_call> block did not hold a JSON object with a name")
        calls += found
    return TextCalls(calls, _HERMES.sub("", text).strip(), dialect="hermes")


def _function_tags(text):
    matches = list(_FUNCTION_TAG.finditer(text))
    if not matches:
        return None
    calls = []
    for number, match in enumerate(matches):
        arguments, error = decode_arguments(match.group(2))
        if error:
            return TextCalls(error=f"<function={match.group(1)}>: {error}")
        calls.append(ToolCall(match.group(1), arguments, f"text_call_{number}"))
    return TextCalls(calls, _FUNCTION_TAG.sub("", text).strip(), dialect="llama_function_tag")


def _mistral(text):
    if _MISTRAL not in text:
        return None
    named = list(_MISTRAL_ARGS.finditer(text))
    if named:  # [TOOL_CALLS]name[ARGS]{...}
        calls = []
        for number, match in enumerate(named):
            value, end = _first_json(text[match.end():])
            if not isinstance(value, dict):
                return TextCalls(error=f"[TOOL_CALLS]{match.group(1)}: arguments are not JSON")
            calls.append(ToolCall(match.group(1), value, f"text_call_{number}"))
        return TextCalls(calls, text[: named[0].start()].strip(), dialect="mistral")
    before, _, after = text.partition(_MISTRAL)
    value, _ = _first_json(after)
    calls = _calls_from_json(json.dumps(value), "text_call") if value is not None else None
    if not calls:
        return TextCalls(error="[TOOL_CALLS] was not followed by a JSON list of calls")
    return TextCalls(calls, before.strip(), dialect="mistral")


def _python_tag(text):
    if _PYTHON_TAG not in text:
        return None
    before, _, after = text.partition(_PYTHON_TAG)
    value, _ = _first_json(after)
    calls = _calls_from_json(json.dumps(value), "text_call") if value is not None else None
    if not calls:
        return TextCalls(error="<|python_tag|> was not followed by a JSON call")
    return TextCalls(calls, before.strip(), dialect="llama_python_tag")


def _pythonic(text):
    """Llama 3.2's `[name(key="value"), other()]`: the whole text must be that list."""
    stripped = text.strip()
    if not (stripped.startswith("[") and stripped.endswith(")]")):
        return None
    try:
        tree = ast.parse(stripped, mode="eval").body
    except SyntaxError:
        return None
    if not isinstance(tree, ast.List) or not tree.elts:
        return None
    calls = []
    for number, node in enumerate(tree.elts):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
            return None
        try:
            arguments = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
        except ValueError:
            return None
        calls.append(ToolCall(node.func.id, arguments, f"text_call_{number}"))
    return TextCalls(calls, "", dialect="pythonic")


def _json_in_text(text):
    """A JSON call object, bare (the whole reply) or in a fence (prose around it is kept)."""
    whole = _calls_from_json(text.strip(), "text_call")
    if whole:
        return TextCalls(whole, "", dialect="json")
    for match in _FENCE.finditer(text):
        calls = _calls_from_json(match.group(1).strip(), "text_call")
        if calls:
            return TextCalls(calls, _FENCE.sub("", text).strip(), dialect="fenced_json")
    value, end = _first_json(text)
    if isinstance(value, dict) and call_from_object(value) is not None:
        start = text.find("{")
        rest = (text[:start] + text[end:]).strip()
        return TextCalls([call_from_object(value, "text_call_0")], rest, dialect="json")
    return None


def looks_like_data(text):
    """True when the text is only a JSON value (bare or fenced): something never to speak."""
    stripped = text.strip()
    fenced = _FENCE.fullmatch(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    if not stripped or stripped[0] not in "{[":
        return False
    try:
        json.loads(stripped)
    except json.JSONDecodeError:
        return False
    return True


def strip_reasoning(text):
    """The text without `<think>...</think>` reasoning."""
    return _THINK.sub("", text or "").strip()


def read_text_calls(content):
    """
    Find the tool calls written into a reply's text.

    Args:
        content (str or None): The reply's text.

    Returns:
        TextCalls: The calls (possibly none), the text left to speak, and an error when the
        text holds call markup that could not be read (then nothing of it may be spoken).
    """
    text = strip_reasoning(content)
    if not text:
        return TextCalls()
    for reader in (_hermes, _function_tags, _mistral, _python_tag, _pythonic, _json_in_text):
        found = reader(text)
        if found is not None:
            if found.error is None and any(marker in found.text for marker in CALL_MARKERS):
                found.error, found.calls = "the reply mixes tool-call markup with text", []
            return found
    if any(marker in text for marker in CALL_MARKERS):
        return TextCalls(error="the reply holds tool-call markup that could not be read")
    return TextCalls(text=text)
