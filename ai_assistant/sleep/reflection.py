"""
Generative reflection (Park et al. 2023, as the specification's reflection system adapts it).

When the importance written since the last reflection reaches the threshold
(`memory.reflection_state.ReflectionState.due`, default 150), the dreaming phase runs
`run_reflection`:

1. question generation - the LLM reads the entries of the reflection window and asks
   `reflection.questions` (3) high-level questions;
2. evidence retrieval - up to `reflection.evidence_per_question` (10) memories per question,
   from the semantic tier when there is one, else from the journal (hybrid search), each
   normalised to `{id, content, score}`;
3. insight generation - the LLM states insights citing the evidence; self-referential ones are
   dropped (persona protection), and the rest are stored as one "[SYNTHESIS] ..." journal entry
   with importance 8 (method "manual": the importance is assigned, not judged), tagged
   synthesis + meta_learning, carrying the cited ids in `"evidence"`.

Then the reflection state is reset (threshold kept, count + 1, time recorded) and the journal's
`last_reflection` set. If an LLM call fails or its reply is unusable, nothing is written or
reset: the next dreaming tick tries again. Entries written while the LLM was thinking stay
counted toward the next reflection.
"""

import re

from twisted.internet import defer

from ai_assistant.memory import journal as journal_module
from ai_assistant.memory import provenance
from ai_assistant.memory.audience import PUBLIC, visible_to
from ai_assistant.memory.corrections import not_recalled
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.longterm.memories import Memories
from ai_assistant.memory.persona import filter_insights
from ai_assistant.memory.reflection_state import ReflectionState
from ai_assistant.memory.search.journal_search import search_journal
from ai_assistant.plumbing.quoting import quote_untrusted, with_data_rule
from ai_assistant.plumbing.replies import find_json

SYNTHESIS_IMPORTANCE = 8
PROMPT_ENTRY_CHARS = 300
QUESTIONS_SYSTEM_PROMPT = with_data_rule(
    "You help a character in a virtual world reflect on its recent experiences. "
    "Focus on the world, its people and events - not on the character itself."
)
INSIGHTS_SYSTEM_PROMPT = with_data_rule(
    "You draw high-level insights about the world, its people and events from evidence. "
    "State insights in the third person as facts or patterns about the world and its people; "
    "never about the assistant, its behaviour or what it should do."
)


_LIST_MARKER = re.compile(r"^\s*(?:[-*\u2022]|\d+[.)]|Q\d+[:.)])\s*")


def _list_lines(text):
    lines = []
    for line in (text or "").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith(("```", "{", "}", "[", "]")):
            continue
        lines.append(_LIST_MARKER.sub("", stripped).strip())
    return [line for line in lines if line]


def parse_questions(text, limit=3):
    """
    Read the questions from a reply: JSON `{"questions": [...]}` or a list of lines.

    Returns:
        list[str]: At most `limit` non-empty questions.
    """
    data = find_json(text)
    if isinstance(data, dict):
        data = data.get("questions")
    if isinstance(data, list):
        questions = [str(q).strip() for q in data if isinstance(q, str) and q.strip()]
    else:
        questions = [line for line in _list_lines(text) if line.endswith("?")]
    return questions[:limit]


_CITATION = re.compile(r"\((?:because of|evidence|sources?)?:?\s*([\dE,\s#]+)\)\s*$", re.I)


def parse_insights(text):
    """
    Read insights from a reply.

    Accepts `{"insights": [{"insight": "...", "evidence": [1, 3]}, ...]}` (evidence numbers as
    shown in the prompt) or lines like `Alice trusts Bob (because of 1, 5)` (Generative Agents'
    format).

    Returns:
        list[dict]: `{"insight": str, "evidence": [int]}` each.
    """
    data = find_json(text)
    if isinstance(data, dict):
        data = data.get("insights")
    insights = []
    if isinstance(data, list):
        for item in data:
            if isinstance(item, str):
                item = {"insight": item}
            if not isinstance(item, dict):
                continue
            insight = str(item.get("insight") or item.get("text") or "").strip()
            evidence = item.get("evidence") or item.get("citations") or []
            if not isinstance(evidence, list):
                evidence = [evidence]
            numbers = [int(n) for n in re.findall(r"\d+", " ".join(map(str, evidence)))]
            if insight:
                insights.append({"insight": insight, "evidence": numbers})
        return insights
    # Plain text counts only as list items or cited lines, so chatter is not an insight.
    for raw in (text or "").splitlines():
        if not (_LIST_MARKER.match(raw) or _CITATION.search(raw)):
            continue
        line = _LIST_MARKER.sub("", raw.strip()).strip()
        match = _CITATION.search(line)
        numbers = [int(n) for n in re.findall(r"\d+", match.group(1))] if match else []
        insight = line[: match.start()].strip() if match else line
        if insight:
            insights.append({"insight": insight, "evidence": numbers})
    return insights


def _window_entries(ports, journal, state):
    """The entries this reflection reads: its window, or the most recent ones."""
    wanted = set(state["entries_since_reflection"])
    # a synthesis is public: what was whispered (an entry with an audience) stays out of it
    public = [e for e in journal.entries() if visible_to(e, PUBLIC) and not not_recalled(e)]
    entries = [e for e in public if e["id"] in wanted]
    if not entries:
        entries = public
    limit = ports.settings.get("reflection.max_prompt_entries")
    return entries[-limit:]


def _questions_prompt(entries, count):
    statements = "\n".join(
        f"- {' '.join(str(e['content']).split())[:PROMPT_ENTRY_CHARS]}" for e in entries
    )
    user = (
        f"Recent statements:\n{quote_untrusted(statements, 'STATEMENTS')}\n\n"
        f"Given only these statements, what are the {count} most salient high-level questions "
        "we can answer about the people, places and events in them?\n"
        'Answer with JSON only: {"questions": ["...", "..."]}'
    )
    return [
        {"role": "system", "content": QUESTIONS_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


def _insights_prompt(questions, evidence):
    # one line per item, so no evidence can forge another's number
    lines = [f"{number}. {' '.join(str(item['content']).split())[:PROMPT_ENTRY_CHARS]}"
             for number, item in evidence]
    user = (
        "Questions (written from the statements, so quoted as data too):\n"
        + quote_untrusted("\n".join(f"- {q}" for q in questions), "QUESTIONS")
        + "\n\nEvidence:\n"
        + quote_untrusted("\n".join(lines), "EVIDENCE")
        + "\n\nWhat high-level insights can you infer from the evidence that answer these "
        "questions? Cite the evidence numbers each insight rests on.\n"
        'Answer with JSON only: {"insights": [{"insight": "...", "evidence": [1, 2]}]}'
    )
    return [
        {"role": "system", "content": INSIGHTS_SYSTEM_PROMPT},
        {"role": "user", "content": user},
    ]


def _source_of(item):
    """Who an evidence item came from, its trust (absent for the assistant's own) and its
    provenance."""
    source = {key: item[key] for key in ("source_entity", "source_trust")
              if item.get(key) is not None}
    source["provenance"] = provenance.of(item)
    return source


def _evidence_ref(item_id):
    """The reference of an evidence id: "mem:<id>" is a memory, anything else an entry."""
    if isinstance(item_id, str) and item_id.startswith("mem:"):
        return provenance.ref("memory", item_id[4:])
    return provenance.ref("journal", item_id)


def synthesis_provenance(cited):
    """
    The provenance of a synthesis (`memory.provenance.derive`): the evidence it cites, and
    the speaker and trust of the least trusted of it, never above an inference's.
    """
    refs = [_evidence_ref(item["id"]) for item in cited]
    for item in cited:
        refs += (item.get("provenance") or {}).get("derived_from") or ()
    return provenance.derive([item.get("provenance") or provenance.of(item) for item in cited],
                             refs, ceiling=provenance.INFERENCE_TRUST)


def synthesis_source(cited):
    """
    The source of a synthesis, from the evidence it cites, never from the model's say-so: the
    speakers of that evidence, at the lowest trust among them and never above an inference's.

    Args:
        cited (list[dict]): The evidence items the kept insights cite.

    Returns:
        tuple: `(source_entity, source_trust)`.
    """
    speakers = sorted({str(item["source_entity"]) for item in cited
                       if item.get("source_entity")})
    trusts = [float(item["source_trust"]) for item in cited
              if isinstance(item.get("source_trust"), int | float)]
    trust = min([journal_module.DEFAULT_SOURCE_TRUST["inference"], *trusts])
    entity = f"reflection on what {', '.join(speakers)} said" if speakers else "reflection"
    return entity[: journal_module.MAX_ENTITY_CHARS], trust


def _normalise_semantic_hits(hits):
    normalised = []
    for hit in hits or ():
        if not isinstance(hit, dict) or not hit.get("memory") or not visible_to(hit, PUBLIC):
            continue
        normalised.append(
            {
                "id": f"mem:{hit.get('id')}",
                "content": str(hit["memory"]),
                "score": float(hit.get("score") or 0.0),
                **_source_of(hit.get("metadata") or hit),
            }
        )
    return normalised


def _journal_evidence(ports, question, limit):
    results = search_journal(ports, question, limit=limit)
    return [
        {"id": entry["id"], "content": entry["content"], "score": round(score, 4),
         **_source_of(entry)}
        for score, entry in results
        if not journal_module.is_synthesis(entry) and visible_to(entry, PUBLIC)
    ]


@defer.inlineCallbacks
def gather_evidence(ports, question, limit=None):
    """
    Up to `limit` memories that bear on a question, normalised to `{id, content, score}`.

    Semantic-tier hits get ids "mem:<id>"; journal entries keep their int ids. A failing
    semantic search falls back to the journal.

    Returns:
        Deferred[list[dict]]: Best first.
    """
    if limit is None:
        limit = ports.settings.get("reflection.evidence_per_question")
    memories = Memories(ports)
    if memories.available:
        try:
            hits = yield memories.search(question, limit=limit)
        except Exception as err:  # noqa: BLE001 - the journal is a fine fallback
            ports.log(f"{ports.name}: reflection evidence search failed ({err}); using journal")
        else:
            evidence = _normalise_semantic_hits(hits)[:limit]
            if evidence:
                return evidence
    return _journal_evidence(ports, question, limit)


def _new_report():
    return {
        "ran": False,
        "reason": None,
        "questions": [],
        "insights": [],
        "rejected": [],
        "entry_id": None,
    }


@defer.inlineCallbacks
def _ask_questions(ports, window):
    """Step 1: the salient high-level questions about the window (errbacks if there are none)."""
    count = ports.settings.get("reflection.questions")
    reply = yield ports.llm.complete(
        _questions_prompt(window, count), purpose="reflection_questions"
    )
    questions = parse_questions(getattr(reply, "content", None), count)
    if not questions:
        raise ValueError("the reply held no questions")
    return questions


@defer.inlineCallbacks
def _collect_evidence(ports, questions):
    """Step 2: the evidence for all questions, numbered from 1, each item once."""
    evidence, seen = [], {}
    for question in questions:
        items = yield gather_evidence(ports, question)
        for item in items:
            if item["id"] not in seen:
                seen[item["id"]] = len(evidence) + 1
                evidence.append((len(evidence) + 1, item))
    if not evidence:
        raise ValueError("no evidence was found for the questions")
    return evidence


@defer.inlineCallbacks
def _ask_insights(ports, questions, evidence):
    """Step 3: the insights the evidence supports (errbacks if there are none)."""
    reply = yield ports.llm.complete(
        _insights_prompt(questions, evidence), purpose="reflection_insights"
    )
    insights = parse_insights(getattr(reply, "content", None))
    if not insights:
        raise ValueError("the reply held no insights")
    return insights


def _store_synthesis(ports, kept, numbered):
    """The kept insights as one [SYNTHESIS] journal entry citing its evidence."""
    cited, lines, sources = [], [], []
    for item in kept:
        ids = [numbered[n]["id"] for n in item["evidence"] if n in numbered]
        sources.extend(numbered[n] for n in item["evidence"] if n in numbered)
        cited.extend(i for i in ids if i not in cited)
        refs = ", ".join(f"#{i}" if isinstance(i, int) else str(i) for i in ids)
        lines.append(f"{item['insight']} (evidence: {refs})" if refs else item["insight"])
    content = f"{journal_module.SYNTHESIS_PREFIX} " + " | ".join(lines)
    max_chars = ports.settings.get("journal.max_content_chars")
    # an insight citing nothing rests on everything the model was shown
    source_entity, source_trust = synthesis_source(sources or list(numbered.values()))
    derived = synthesis_provenance(sources or list(numbered.values()))
    return Journal(ports).add(
        content[:max_chars],
        tags=list(journal_module.SYNTHESIS_TAGS),
        source_type="inference",
        source_entity=source_entity,
        source_trust=source_trust,
        importance=SYNTHESIS_IMPORTANCE,
        evidence=cited,
        count_for_reflection=False,
        provenance=derived,
    )


def _finish(ports, report, insights, numbered, covered_ids, covered_importance):
    """Store the insights and start a new reflection window (no yield inside: fresh state)."""
    kept, rejected = filter_insights(insights)
    report["rejected"] = [item["insight"] for item in rejected]
    report["ran"] = True
    if kept:
        report["entry_id"] = _store_synthesis(ports, kept, numbered)["id"]
        report["insights"] = [item["insight"] for item in kept]
    else:
        report["reason"] = "every insight was self-referential; nothing stored"

    ReflectionState(ports).reset(covered_ids, covered_importance)
    Journal(ports).mark_reflected()
    ports.log(
        f"{ports.name}: reflection stored {len(report['insights'])} insight(s), "
        f"rejected {len(report['rejected'])}"
    )
    return report


@defer.inlineCallbacks
def run_reflection(ports):
    """
    Reflect once on the entries gathered since the last reflection (see the module doc).

    It does not check the trigger: the dreaming phase calls it when `ReflectionState.due`
    says so, an admin's `@assistant/reflect` whenever asked.

    Args:
        ports (AssistantPorts): The assistant.

    Returns:
        Deferred[dict]: `{"ran": bool, "reason": str or None, "questions": [...],
        "insights": [...], "rejected": [...], "entry_id": int or None}`; never errbacks.
    """
    report = _new_report()
    if ports.mechanical:
        ports.log(f"{ports.name}: reflection skipped (mechanical mode, no LLM)")
        report["reason"] = "mechanical mode"
        return report

    state = ReflectionState(ports).current()
    window = _window_entries(ports, Journal(ports), state)
    if not window:
        report["reason"] = "no journal entries to reflect on"
        return report
    # What this reflection covers; entries written while it runs stay for the next one.
    covered_ids = list(state["entries_since_reflection"])
    covered_importance = state["cumulative_importance"]

    try:
        questions = yield _ask_questions(ports, window)
        report["questions"] = questions
        evidence = yield _collect_evidence(ports, questions)
        insights = yield _ask_insights(ports, questions, evidence)
    except Exception as err:  # noqa: BLE001 - nothing written, retried next tick
        report["reason"] = f"reflection failed, will retry: {type(err).__name__}: {err}"
        ports.log(f"{ports.name}: {report['reason']}")
        return report
    return _finish(ports, report, insights, dict(evidence), covered_ids, covered_importance)


def run_reflection_if_triggered(ports):
    """
    The dreaming-phase step: reflect only once the importance threshold is reached.

    Returns:
        dict or Deferred[dict]: `{"ran": False, "reason": ...}` below the threshold, else the
        report of `run_reflection`.
    """
    reflection = ReflectionState(ports)
    if not reflection.due():
        state = reflection.current()
        return {"ran": False, "reason": f"below threshold ({state['cumulative_importance']:g}"
                                        f"/{state['threshold']:g})"}
    return run_reflection(ports)
