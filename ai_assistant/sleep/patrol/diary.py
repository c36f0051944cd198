"""
Patrol step: the diary entry and the think notes.

From the scenes filed since the last diary, the model writes today's diary entry (3-5 lines,
kept in "diary" by date, for its last `nodes.diary_kept` days) and the think notes (3-7
bullets, "think_notes") that the assistant's next conversation starts with. Scenes stay
pending until a call succeeds.

Both are the assistant's own writing, derived from the scenes they are about
(`scenes_provenance`): they name those nodes and what the nodes were made from, and take the
speaker and trust of the least trusted scene, never above an inference's, so a diary written
over a player's scene is that player's testimony, not the assistant's knowledge.
"""

from twisted.internet import defer

from ai_assistant.memory import nodes as nodes_model
from ai_assistant.memory import provenance
from ai_assistant.memory.audience import PUBLIC, visible_to
from ai_assistant.memory.nodes import Nodes, scene_to_text, setting
from ai_assistant.memory.patrol_record import PatrolRecord
from ai_assistant.plumbing.ports import LLMError
from ai_assistant.plumbing.quoting import defuse
from ai_assistant.sleep.patrol.graph import now_iso
from ai_assistant.sleep.patrol.prompts import DIARY_PROMPT, ask_json


def _diary_lines(text):
    lines = [" ".join(line.split()) for line in str(text or "").splitlines()]
    return [line for line in lines if line]


def _think_bullets(ports, think):
    """The think notes of a reply as clean bullets, at most `think_max_bullets`."""
    if isinstance(think, str):
        think = _diary_lines(think)
    bullets = [" ".join(str(b).lstrip("-•* ").split()) for b in (think or [])]
    return [b for b in bullets if b][: int(setting(ports, "think_max_bullets"))]


def scenes_provenance(scenes):
    """
    The provenance of what the patrol writes about `scenes` (`provenance.derive`): the nodes
    (and what they were made from), at the least trusted scene's speaker and trust, capped at
    an inference's.
    """
    refs = []
    for node in scenes:
        refs += [provenance.ref("node", node["id"]), *provenance.of(node)["derived_from"]]
    return provenance.derive([provenance.of(node) for node in scenes], refs,
                             ceiling=provenance.INFERENCE_TRUST)


def _store(ports, date, diary_lines, bullets, scenes):
    """Write the diary entry and think notes; the scenes written about leave the queue."""
    stamp = now_iso(ports)
    record = PatrolRecord(ports)
    derived = scenes_provenance(scenes)
    if diary_lines:  # bounded: its last days only
        record.write_diary(date, "\n".join(diary_lines), stamp, provenance=derived)
    if bullets:
        record.write_think_notes(bullets, stamp, provenance=derived)
    record.written_in_diary(node["id"] for node in scenes)


@defer.inlineCallbacks
def write_diary_and_think(ports):
    """
    The diary entry for today (3-5 lines) and the think notes (3-7 bullets) from the scenes
    filed since the last diary. Unwritten scenes stay pending until a call succeeds.

    Returns:
        Deferred[dict]: `{"diary": bool, "think": int}` or `{"skipped": ...}`.
    """
    if ports.mechanical:
        return {"skipped": "mechanical mode"}
    pending = PatrolRecord(ports).diary_pending()
    nodes = Nodes(ports).nodes()
    # the diary and the think notes are for everyone: a scene told in private stays out
    scenes = [nodes[i] for i in pending if i in nodes and visible_to(nodes[i], PUBLIC)][-40:]
    if not scenes:
        if pending:
            PatrolRecord(ports).clear_diary_pending()
        return {"skipped": "no new scenes"}
    date = nodes_model.today(ports)
    lines = "\n".join(f"- {' '.join(defuse(scene_to_text(node), 400).split())}" for node in scenes)
    prompt = DIARY_PROMPT.format(name=ports.name, lines=lines, date=date)
    try:
        reply = yield ask_json(ports, prompt, "patrol_diary")
    except LLMError as err:
        ports.log(f"{ports.name}: patrol diary failed, retried next patrol: {err}")
        return {"error": str(err)}
    diary = reply.get("diary")
    diary_lines = _diary_lines("\n".join(diary) if isinstance(diary, list) else diary)[:5]
    bullets = _think_bullets(ports, reply.get("think"))
    if not diary_lines and not bullets:
        return {"error": "the diary reply had neither a diary nor think notes"}
    _store(ports, date, diary_lines, bullets, scenes)
    return {"diary": bool(diary_lines), "diary_lines": len(diary_lines), "think": len(bullets)}
