"""
How much a line says: informative memories win over small talk.

"Yup, ttyl!", "ok", "Hi Mel! How are you?" match many questions a little (a name, "how") and
say nothing worth recalling. The measure is general language, nothing specific to any data:
the distinct content words of what was said (stop words, greetings, acknowledgements and
fillers left out, and the speaker's framing "Orla said to me:" too), saturating at
`FULL_INFORMATION` words. Numbers count: dates and amounts are facts.
"""

import re

from ai_assistant.memory.search.terms import STOPWORDS, words

# Distinct content words at which a line counts as fully informative.
FULL_INFORMATION = 4
# Conversational words that carry no content: greetings, farewells, acknowledgements, fillers,
# laughter, politeness and intensifiers (general English chat, not any data set's vocabulary).
PHATIC = frozenset(
    """
    hi hey hello hiya howdy yo bye goodbye ttyl cya later gn goodnight ok okay okey k kk yes
    yeah yep yup yea nope nah sure alright thanks thank thx ty welcome please sorry cool nice
    great awesome wow oh ah ahh aw aww hmm hm um uh lol lmao haha hahaha hehe omg yay wonderful
    amazing fantastic totally definitely absolutely really lot lots thing things stuff anyway
    also still pretty super
    """.split()
)
# The framing the journal puts around what was heard: `Name said to me: "..."`.
_QUOTED = re.compile(r'^[^"]{0,80}?:\s*"(?P<said>.*)"\s*$', re.DOTALL)


def spoken_text(content):
    """What was said, without the journal's framing (`Orla said to me: "..."`)."""
    content = str(content or "")
    match = _QUOTED.match(content.strip())
    return match.group("said") if match else content


def information(content, ignore=()):
    """
    How informative a line is, 0.0 (small talk) to 1.0.

    Args:
        content (str): The line (a journal entry's or a memory's text).
        ignore (iterable): Lower-case words that carry no information here (the speakers'
            names: a greeting that names someone is still a greeting).

    Returns:
        float: Distinct content words / FULL_INFORMATION, at most 1.0.
    """
    ignored = set(ignore)
    content_words = {
        word for word in words(spoken_text(content))
        if word not in STOPWORDS and word not in PHATIC and word not in ignored
        and (len(word) > 2 or word.isdigit())
    }  # fmt: skip
    return min(1.0, len(content_words) / FULL_INFORMATION)
