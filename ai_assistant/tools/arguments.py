"""
One argument policy for every tool: how a model's (or an admin's) arguments are made to fit a
tool's JSON schema, and how what still does not fit is told back, in sentences.

The rules, the same for every tool (`fit_arguments`):

- an argument the tool does not take is dropped, and named in the note the model sees;
- a single stray argument fills a single missing required one when its value fits that
  argument's type (`{"text": "hi"}` to `say` is `{"message": "hi"}`);
- numbers, booleans, lists and objects sent as text are converted;
- an argument a former tool took is mapped as the tool declares (`Tool.former_arguments`):
  `recall_memory {"query": ...}`, from when `recall_memory` searched, runs `recall_scenes`.

A tool may opt out of dropping with `strict_arguments`, and must say why in its class (an
unexpected argument to `update_system_prompt` may aim at the admins' prompt: it is refused,
never guessed at). What is still wrong after fitting is refused with a sentence that names the
argument and what it takes (`refusal`), never the schema validator's own text.
"""

import json
import re

import jsonschema

_TRUE, _FALSE = ("true", "yes", "1", "on"), ("false", "no", "0", "off")
JSON_TYPES = {"string": "text", "integer": "a whole number", "number": "a number",
              "boolean": "true or false", "array": "a list", "object": "an object"}
PYTHON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool,
                "array": list, "object": dict}


def coerce(value, spec):
    """`value` as the schema's type where a model sent it as text (or as the wrong number)."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if isinstance(value, str):
        text = value.strip()
        try:
            if kind == "integer" and re.fullmatch(r"[-+]?\d+(\.0*)?", text):
                return int(float(text))
            if kind == "number" and text:
                return float(text)
        except ValueError:
            return value
        if kind == "boolean" and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        if kind in ("array", "object") and text[:1] in "[{":
            try:
                decoded = json.loads(text)
            except json.JSONDecodeError:
                return value
            return decoded if isinstance(decoded, list if kind == "array" else dict) else value
    elif kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _fits(value, spec):
    """True when `value` (after `coerce`) has the type the argument's schema asks for."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    if kind not in PYTHON_TYPES:
        return True
    value = coerce(value, spec)
    if kind in ("integer", "number") and isinstance(value, bool):
        return False
    return isinstance(value, PYTHON_TYPES[kind])


def takes_unknown(tool):
    """True when the tool's schema accepts any argument (`additionalProperties: true`)."""
    return tool.parameters.get("additionalProperties") is True


def former_call(tool, params):
    """
    The tool a call with a former tool's arguments means, by `Tool.former_arguments`.

    Returns:
        tuple or None: `(tool name, {old argument: new argument})`, or None when the call
        uses the tool's own arguments.
    """
    properties = tool.parameters.get("properties") or {}
    mapped = {key: tool.former_arguments[key] for key in params
              if key not in properties and key in tool.former_arguments}
    missing = [key for key in tool.parameters.get("required") or () if key not in params]
    if not mapped or not missing:
        return None
    targets = {target.partition(".")[0] for target in mapped.values()}
    if len(targets) != 1:
        return None
    return targets.pop(), {old: new.partition(".")[2] for old, new in mapped.items()}


def fit_arguments(tool, params):
    """
    Make a model's arguments fit the tool (see the module doc for the rules).

    Args:
        tool (Tool): The tool.
        params (dict): The arguments (not changed).

    Returns:
        tuple: `(arguments that fit, notes for the model)`; notes name what was dropped or
        renamed.
    """
    properties = tool.parameters.get("properties") or {}
    params = dict(params)
    notes = []
    if not takes_unknown(tool) and not tool.strict_arguments:
        unknown = [key for key in params if key not in properties and key != "reasoning"]
        missing = [key for key in tool.parameters.get("required") or () if key not in params]
        if len(unknown) == 1 and len(missing) == 1 \
                and _fits(params[unknown[0]], properties.get(missing[0], {})):
            params[missing[0]] = params.pop(unknown[0])
            notes.append(f"took '{unknown[0]}' as '{missing[0]}'")
            unknown = []
        for key in unknown:
            params.pop(key)
        if unknown:
            notes.append(f"ignored unknown arguments: {', '.join(sorted(unknown))} "
                         f"(this tool takes: {', '.join(properties) or 'none'})")
    for key, value in params.items():
        if key in properties:
            params[key] = coerce(value, properties[key])
    return params, notes


def refusal(tool, params):
    """
    Check `params` against the tool's schema.

    Returns:
        str or None: What is wrong, as a sentence naming the argument and what it takes; None
        when the arguments are valid.
    """
    error = jsonschema.exceptions.best_match(tool.validator().iter_errors(params))
    if error is None:
        return None
    return f"{tool.name}: {_sentence(tool, error)}"


def _takes(tool):
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or ())
    described = [f"{name} ({JSON_TYPES.get(spec.get('type'), 'a value')}"
                 f"{', required' if name in required else ''})"
                 for name, spec in properties.items()]
    return "it takes " + (", ".join(described) if described else "no arguments")


def _sentence(tool, error):
    """One validation error of `tool`'s arguments in words."""
    where = ".".join(str(part) for part in error.absolute_path)
    name = f"'{where}'" if where else "the arguments"
    value, keyword, bound = error.instance, error.validator, error.validator_value
    if keyword == "required":
        missing = [key for key in bound if key not in (value or {})]
        return f"missing required argument {', '.join(map(repr, missing))}; {_takes(tool)}."
    if keyword == "additionalProperties":
        properties = (error.schema or {}).get("properties") or {}
        extra = sorted(key for key in (value or {}) if key not in properties)
        return (f"this tool does not take {', '.join(map(repr, extra))}; {_takes(tool)}.")
    if keyword == "type":
        kinds = bound if isinstance(bound, list) else [bound]
        wanted = " or ".join(JSON_TYPES.get(kind, kind) for kind in kinds)
        return f"{name} must be {wanted}, not {_shown(value)}."
    if keyword == "enum":
        return f"{name} must be one of: {', '.join(map(str, bound))}; got {_shown(value)}."
    if keyword == "minLength":
        if bound <= 1:
            return f"{name} must not be empty."
        return f"{name} must be at least {bound} characters long."
    if keyword == "maxLength":
        return f"{name} is too long: at most {bound} characters ({len(value)} given)."
    if keyword in ("minimum", "exclusiveMinimum"):
        return f"{name} must be {'over' if keyword.startswith('ex') else 'at least'} {bound}."
    if keyword in ("maximum", "exclusiveMaximum"):
        return f"{name} must be {'under' if keyword.startswith('ex') else 'at most'} {bound}."
    if keyword == "minItems":
        return f"{name} needs at least {bound} item{'s' if bound != 1 else ''}."
    if keyword == "maxItems":
        return f"{name} takes at most {bound} items."
    if keyword == "pattern":
        return f"{name} does not have the expected form; got {_shown(value)}."
    return f"{name} is not valid here ({keyword})."


def _shown(value):
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
