"""
Admin views: the text `@assistant` shows for one assistant (status and config).
"""

import json

from ai_assistant.plumbing import documents

# settings whose value may hold a password: never echoed in game
HIDDEN_SETTINGS = ("llm.api_key", "memory.postgres_url")


def mask_secret(secret):
    """Show a key's shape, never the key: `sk-...abcd`."""
    try:
        from ai_assistant.plumbing.llm import mask_secret as llm_mask

        return llm_mask(secret)
    except ImportError:  # pragma: no cover - the agent package always ships it
        return "(set)" if secret else "(none)"


def provider_line(settings, llm):
    """One line naming the LLM provider, or mechanical mode."""
    if llm is None:
        return "mechanical (no LLM configured)"
    config = settings.get("llm")
    endpoint = config.get("base_url") or "https://api.openai.com/v1"
    return f"{config.get('model')} at {endpoint} (key {mask_secret(config.get('api_key'))})"


def format_status(npc):
    """
    Args:
        npc (AssistantMixin): The assistant.

    Returns:
        str: Mode, sleep phase, tick, provider, token usage and counts.
    """
    ports = npc.assistant.ports()
    state = ports.state
    script = npc.assistant.script
    mode = state.get(documents.OPERATING_MODE) or "awake"
    phase = state.get(documents.SLEEP_PHASE)
    interval = script.attributes.get(documents.TICKER_INTERVAL) if script else None
    stats = npc.assistant.llm_stats.read()
    journal = npc.assistant.journal
    lines = [
        f"|w{npc.key}|n ({npc.dbref}) in {npc.location.key if npc.location else 'nowhere'}",
        f"  mode: {mode}" + (f" (phase: {phase})" if mode == "sleep" else ""),
        f"  ticker: every {interval}s" if interval else "  ticker: |rnot subscribed|n",
        f"  ticks: {state.get(documents.TICK_COUNT) or 0} (skipped while busy: "
        f"{state.get(documents.SKIPPED_TICKS) or 0})",
        f"  provider: {provider_line(ports.settings, ports.llm)}",
        f"  tokens: prompt {stats.get('prompt_tokens', 0)}, completion "
        f"{stats.get('completion_tokens', 0)} in {stats.get('calls', 0)} calls "
        f"({stats.get('failures', 0)} failed)",
    ]
    lines += settings_problem_lines(ports.settings)
    if stats.get("emergency_stop"):
        lines.append("  |rEMERGENCY STOP|n after repeated LLM errors "
                     f"({stats.get('last_error')}); @assistant/wake or /config clears it")
    queue = npc.assistant.perception
    lines.append(
        f"  events queued: {len(queue.waiting())} (dropped: {queue.dropped()}); "
        f"conversations: {len(npc.assistant.conversation.interlocutors())}"
    )
    unanswered = npc.assistant.loop.last_unanswered()
    if unanswered:
        # someone got the fallback line instead of an answer: say why (awake._never_silent)
        lines.append(f"  last unanswered: {unanswered.get('who')} at {unanswered.get('time')}: "
                     f"{unanswered.get('reason')}")
    entries = journal.entries()
    lines.append(
        f"  journal: {len(entries)} entries (consolidated "
        f"{len(journal.consolidated_ids())}); goals: "
        f"{len(state.get(documents.CURRENT_GOALS) or [])}; profiles: "
        f"{len(npc.assistant.people.profiles())}"
    )
    last = state.get(documents.LAST_SLEEP_TICK)
    if last:
        done = ", ".join(f"{name}: {_summary(result)}" for name, result in last["steps"].items())
        lines.append(f"  last sleep tick ({last['phase']}, {last['time']}): {done or 'nothing'}")
    return "\n".join(lines)


def _summary(result):
    if isinstance(result, dict):
        if result.get("error"):
            return f"|rerror: {result['error']}|n"
        keys = [f"{k}={v}" for k, v in result.items() if isinstance(v, int | float | bool | str)]
        return " ".join(keys[:4]) or "ok"
    if isinstance(result, list):
        return f"{len(result)}"
    return str(result)


def settings_problem_lines(settings):
    """
    One line per stored setting value that was ignored (out of its type or range).

    Args:
        settings (Settings): The NPC's settings (`problems` lists what was ignored).

    Returns:
        list: Status lines; empty when every value is fine.
    """
    lines = []
    for problem in settings.problems:
        instead = "the game's value" if problem["source"] == "per-NPC config" else "the default"
        lines.append(f"  |rignored setting|n {problem['key']} = {problem['value']!r} from "
                     f"{problem['source']}: {problem['error']}; {instead} is used")
    return lines


def format_config(npc):
    """The NPC's overrides and its effective LLM settings (keys masked)."""
    overrides = dict(npc.attributes.get(documents.CONFIG_OVERRIDES) or {})
    settings = npc.assistant.ports().settings
    llm = dict(settings.get("llm"))
    llm["api_key"] = mask_secret(llm.get("api_key"))
    shown = {key: ("(hidden)" if key in HIDDEN_SETTINGS else value)
             for key, value in overrides.items()}
    lines = [
        f"|wConfig of {npc.key}|n",
        "  overrides: " + (json.dumps(shown, sort_keys=True) if shown else "none"),
        "  llm: " + json.dumps(llm, sort_keys=True, default=str),
        f"  ticks: awake {settings.get('ticks.awake')}s, sleep {settings.get('ticks.sleep')}s",
        *settings_problem_lines(settings),
        "  set one with: @assistant/config <npc> = <dotted.key> <value>",
    ]
    return "\n".join(lines)
