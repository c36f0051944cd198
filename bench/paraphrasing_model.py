"""
A scripted model for the benches: answers every request the assistant makes the way a real
model would in shape, and paraphrases what it is asked to remember.

`ParaphrasingModel` is an in-process `LLMPort` (`complete(messages, tools=, purpose=)` ->
Deferred[`LLMReply`]) that reads each request's `purpose` and answers in the format the step
that asked parses:

- `importance` (the sleep's batched scoring call, which also extracts facts) and
  `fact_extraction` (consolidation's own call): for every event quoted in the prompt a score
  and, unless it is marked "(score only)", its facts. A fact is a deterministic paraphrase of
  one sentence of what was said (`paraphrase_facts`): the content words (names, numbers,
  nouns, verbs) are kept, the speaker's own phrasing is dropped (interjections, hedges and
  intensifiers, time words relative to the moment of speaking), and the first person becomes
  the speaker's name ("I adopted a puppy named Rex last week" said by Sam -> "Sam adopted a
  puppy named Rex"). A sentence left with fewer than two content words (small talk, "Wow,
  thanks!") states no fact. A shared picture becomes "<speaker> shared a photo of <caption>".
- the score is plausible, not tuned: 2 for an event with no facts (small talk, below
  `memory.min_importance`, as a real model rates it), otherwise 4 plus one for every four
  content words, at most 9.
- `compaction`: a one-line summary naming the speakers and the first content words said.
- `entity_consolidation`, `reflection_questions`, `reflection_insights` and the memory patrol's
  steps: valid minimal JSON (no attributes, one generic question, no insights, nothing to
  merge or split, a short diary).
- a request with tools (a turn of the ReAct loop): one `say` of a short, neutral line; a pass
  whose tools hold no `say` (the review before a compaction) calls `noop`.

Nothing here knows any data set: the rules are general English. `calls` counts the requests by
purpose, and `unknown` those whose purpose it has no rule for (answered with `{}`).
"""

import json
import re
from collections import Counter

from twisted.internet import defer

from ai_assistant.plumbing.ports import LLMReply, ToolCall

REPLY_LINE = "I see. Go on."

# "[12]" or "[12] (score only)", then the quoted event (plumbing.quoting.quote_untrusted)
_QUOTED_EVENT = re.compile(
    r"^\[(?P<id>[^\]\n]+)\](?P<score_only> \(score only\))?\n<<<BEGIN (?:EVENT|ENTRY) [^>\n]*>>>\n"
    r"(?P<content>.*?)\n<<<END (?:EVENT|ENTRY) ",
    re.M | re.S,
)
# how the awake tick journals a line heard (agent/awake.py, HEARD_SOURCE and PRIVATE_HEARD)
_HEARD = re.compile(
    r'^(?P<name>.+?) (?:said to me|said|whispered to me \(private\)): "(?P<text>.*)"\s*$', re.S
)
_PHOTO = re.compile(r"\s*\[shares a photo: (?P<caption>[^\]]*)\]")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'’-]*")

# the speaker's phrasing a paraphrase drops: interjections, hedges, intensifiers, fillers
_DROPPED_PHRASES = (
    "you know", "i mean", "i think", "i guess", "i believe", "kind of", "sort of",
    "to be honest", "by the way", "of course", "for sure", "oh my god", "oh my gosh",
    "the other day", "a few days ago", "a couple of days ago", "last night", "last week",
    "last weekend", "this week", "this weekend", "last month", "this month", "last year",
    "this year", "right now", "these days", "yesterday", "today", "tonight", "recently",
    "lately", "just now",
)  # fmt: skip
_DROPPED_WORDS = frozenset("""
    oh ooh wow hey hi hello yeah yes yep yup nah ok okay lol haha hahaha omg um uh hmm aw aww
    whoa woah wowza gosh ah ahh well so really just actually totally definitely absolutely
    pretty super literally honestly basically truly very quite sooo soo
""".split())
# first person -> the speaker (and the verb that must follow a third person)
_FIRST_PERSON = {
    "i'm": "{name} is", "i’m": "{name} is", "i've": "{name} has", "i’ve": "{name} has",
    "i'd": "{name} would", "i’d": "{name} would", "i'll": "{name} will",
    "i’ll": "{name} will", "i": "{name}", "me": "{name}", "myself": "{name}",
    "my": "{name}'s", "mine": "{name}'s", "we're": "{name} and others are",
    "we’re": "{name} and others are", "we've": "{name} and others have",
    "we’ve": "{name} and others have", "we": "{name} and others", "us": "{name} and others",
    "our": "{name}'s", "ours": "{name}'s",
    "you": "the listener", "your": "the listener's", "yours": "the listener's",
    "yourself": "the listener", "you're": "the listener is", "you’re": "the listener is",
    "you've": "the listener has", "you’ve": "the listener has",
}  # fmt: skip
_AGREEMENT = {"am": "is", "have": "has", "do": "does", "don't": "doesn't", "don’t": "doesn't",
              "was": "was", "were": "was"}  # fmt: skip
_STOPWORDS = frozenset("""
    a an the and or but if of to in on at by for with from as is are was were be been being am
    it its this that these those there here he she they them his her their him what which who
    whom when where why how not no nor too than then also can could would should will shall may
    might must do does did done has have had having some any all each every more most much many
    such own same other into onto about over under again once only up down out off listener
    others thing things stuff something anything everything lot lots one
""".split())
_LEADING_JOINERS = frozenset({"and", "but", "so", "or", "because", "then", "also"})

SUMMARY_WORDS = 16


def content_words(text):
    """The words of `text` that carry content: not stopwords, at least 3 letters or a number."""
    return [word for word in _WORD.findall(text.lower())
            if word not in _STOPWORDS and word not in _DROPPED_WORDS
            and (len(word) >= 3 or word.isdigit())]  # fmt: skip


def _drop_phrasing(sentence):
    text = " " + sentence + " "
    for phrase in _DROPPED_PHRASES:
        text = re.sub(rf"(?i)(?<![\w'’]){re.escape(phrase)}(?![\w'’])", " ", text)
    kept = [word for word in text.split()
            if word.lower().strip(",.!?;:\"()") not in _DROPPED_WORDS]  # fmt: skip
    return " ".join(kept)


def _third_person(sentence, name):
    """First and second person rewritten: the speaker by name, the one spoken to as listener."""
    out, before = [], ["", ""]  # the two original words before this one
    for word in sentence.split():
        core = word.strip(",.!?;:\"()")
        lead = word[: word.find(core)] if core else ""
        trail = word[len(word.rstrip(",.!?;:\"()")) :]
        swap = _FIRST_PERSON.get(core.lower()) if core else None
        if swap is not None:
            out.append(lead + swap.format(name=name) + trail)
        elif before[1] == "i" and before[0] != "and" and core.lower() in _AGREEMENT:
            out.append(lead + _AGREEMENT[core.lower()] + trail)  # "I have" -> "Sam has"
        else:
            out.append(word)
        before = [before[1], core.lower()]
    return " ".join(out)


def _tidy(sentence):
    sentence = re.sub(r"\s+([,.!?;:])", r"\1", " ".join(sentence.split()))
    sentence = re.sub(r"([,;:])(?:\s*[,;:])+", r"\1", sentence).strip(" ,;:-")
    words = sentence.split()
    while words and words[0].lower().strip(",") in _LEADING_JOINERS:
        words.pop(0)
    sentence = " ".join(words).rstrip(",;:!?. ")
    return (sentence[:1].upper() + sentence[1:] + ".") if sentence else ""


def paraphrase_facts(content, max_facts=10):
    """
    The facts a model lists for one journal entry: a paraphrase of each sentence that says
    something, in the third person.

    Args:
        content (str): The entry's text (`<name> said to me: "<words>"`, or anything).
        max_facts (int): At most this many; past it, neighbouring sentences share a fact.

    Returns:
        list[str]: The facts (empty when nothing but small talk was said).
    """
    heard = _HEARD.match(content.strip())
    name, text = (heard["name"], heard["text"]) if heard else ("Someone", content)
    facts = []
    for photo in _PHOTO.finditer(text):
        caption = photo["caption"].strip().rstrip(".")
        if caption:
            facts.append(f"{name} shared a photo of {caption}.")
    sentences = []
    for sentence in _SENTENCE_END.split(_PHOTO.sub("", text).strip()):
        asked = sentence.rstrip().endswith("?")
        said = _tidy(_third_person(_drop_phrasing(sentence), name))
        if len(content_words(said.replace(name, " "))) < 2:
            continue  # small talk: no fact
        if asked:
            said = f"{name} asked: {said[:1].lower()}{said[1:]}"
        sentences.append(said)
    limit = max(1, int(max_facts) - len(facts))
    while len(sentences) > limit:  # a long turn: neighbours share a fact, none is dropped
        merged = [" ".join(sentences[i : i + 2]) for i in range(0, len(sentences), 2)]
        sentences = merged
    return facts + sentences


def importance(facts):
    """A plausible 1-10 score: small talk 2, otherwise 4 plus one per four content words."""
    words = sum(len(content_words(fact)) for fact in facts)
    return 2 if not facts else min(9, 4 + words // 4)


def quoted_events(prompt):
    """`[(id, score_only, content)]` of the events or entries a sleep prompt quotes."""
    found = []
    for match in _QUOTED_EVENT.finditer(prompt):
        raw = match["id"].strip()
        found.append((int(raw) if raw.isdigit() else raw, bool(match["score_only"]),
                      match["content"]))  # fmt: skip
    return found


def _user_text(messages):
    return "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == "user")


class ParaphrasingModel:
    """
    The scripted model (an `LLMPort`): see the module's docstring.

    Args:
        max_facts (int): Facts listed per event at most (`memory.max_facts_per_entry`).
    """

    def __init__(self, max_facts=10):
        self.max_facts = max_facts
        self.calls = Counter()
        self.unknown = Counter()
        self.facts_listed = 0
        self.events_without_facts = 0

    def complete(self, messages, *, tools=None, purpose="chat", **params):
        self.calls[purpose] += 1
        if tools:
            return defer.succeed(self._act(tools))
        answer = getattr(self, f"_answer_{purpose}", None)
        if answer is None:
            self.unknown[purpose] += 1
            return defer.succeed(LLMReply(content="{}"))
        return defer.succeed(LLMReply(content=answer(_user_text(messages))))

    def _act(self, tools):
        """A turn of the ReAct loop: say a short line, or (a pass with nothing to say) noop."""
        names = {(spec.get("function") or spec).get("name") for spec in tools
                 if isinstance(spec, dict)}  # fmt: skip
        number = sum(self.calls.values())
        if "say" in names:
            call = ToolCall("say", json.dumps({"message": REPLY_LINE}), f"call_{number}")
        elif "noop" in names:
            call = ToolCall("noop", "{}", f"call_{number}")
        else:
            return LLMReply(content="Nothing to add.")
        return LLMReply(content=None, tool_calls=[call])

    def _facts(self, content):
        facts = paraphrase_facts(content, self.max_facts)
        self.facts_listed += len(facts)
        self.events_without_facts += not facts
        return facts

    def _answer_importance(self, prompt):
        scores = []
        for event_id, score_only, content in quoted_events(prompt):
            facts = paraphrase_facts(content, self.max_facts)
            item = {"id": event_id, "score": importance(facts)}
            if not score_only:
                item["facts"] = self._facts(content)
            scores.append(item)
        return json.dumps({"scores": scores})

    def _answer_fact_extraction(self, prompt):
        return json.dumps({"entries": [{"id": event_id, "facts": self._facts(content)}
                                       for event_id, _, content in quoted_events(prompt)]})

    def _answer_compaction(self, prompt):
        speakers = list(dict.fromkeys(re.findall(r"^\s*(?:\[[^\]]*\]\s*)?([A-Z][\w'-]*)[:,]",
                                                 prompt, re.M)))[:3]  # fmt: skip
        words = list(dict.fromkeys(content_words(prompt)))[:SUMMARY_WORDS]
        who = " and ".join(speakers) if speakers else "People"
        return f"{who} talked about {', '.join(words) or 'various things'}."

    def _answer_entity_consolidation(self, prompt):
        return json.dumps({"attributes": {}})

    def _answer_reflection_questions(self, prompt):
        return json.dumps({"questions": ["What matters most to the people in these statements?"]})

    def _answer_reflection_insights(self, prompt):
        return json.dumps({"insights": []})

    def _answer_patrol_classify(self, prompt):
        numbers = re.findall(r"^\s*(\d+)[.)]", prompt, re.M)
        return json.dumps({number: "Private" for number in numbers})

    def _answer_patrol_consolidate(self, prompt):
        return json.dumps({"merges": [], "make_dead": []})

    def _answer_patrol_split(self, prompt):
        return json.dumps({"groups": []})

    def _answer_patrol_diary(self, prompt):
        return json.dumps({"diary": "A quiet day of listening.", "think": []})

    def report(self):
        """What the model was asked and gave, for the results document."""
        return {"calls": dict(sorted(self.calls.items())),
                "unknown_purposes": dict(sorted(self.unknown.items())),
                "facts_listed": self.facts_listed,
                "events_without_facts": self.events_without_facts}  # fmt: skip
