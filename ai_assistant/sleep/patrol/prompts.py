"""
What the memory patrol asks the model: the prompt texts of its LLM steps, and how it asks.

Every call wants JSON only, under the same standing rule on quoted text as the awake prompt
(the memories are the words of players and the assistant, shown defused in data blocks);
nodes are shown under short labels (`n1`, `n2`...) that the reply names them by, because models
mangle long ids.
"""

from ai_assistant.memory.nodes import ACTIVE, scene_to_text
from ai_assistant.plumbing.llm import complete_text
from ai_assistant.plumbing.quoting import defuse, with_data_rule
from ai_assistant.plumbing.replies import parse_json_reply

PATROL_SYSTEM = with_data_rule(
    "You maintain the long-term memory of {name}, a character in a text-based game. "
    "Answer with JSON only, exactly in the format asked for."
)

CLASSIFY_PROMPT = """\
Classify each memory of {name} as Business (work, tasks, trade, duties, the game world's \
affairs) or Private (friendships, feelings, personal life).

<<<BEGIN MEMORIES>>>
{lines}
<<<END MEMORIES>>>

Reply with a JSON object mapping each number to "Business" or "Private", e.g. \
{{"1": "Private", "2": "Business"}}."""

CONSOLIDATE_PROMPT = """\
Consolidate the memories in the cluster "{cluster}" of {name}.
Each line: [label] status — date — setting — action — "dialogue" — (feeling).
fresh = new since the last patrol; dying = fading away; active = settled.

<<<BEGIN MEMORIES>>>
{lines}
<<<END MEMORIES>>>

Find merge pairs: memories that describe the same event or complete each other. The survivor \
absorbs the others (their dates are kept in its timeline). List in make_dead the dying \
memories that are not worth keeping and have no merge partner.
Reply with JSON: {{"merges": [{{"survivor": "n1", "absorbed": ["n2"]}}], "make_dead": ["n3"]}}
Use [] where there is nothing to do."""

SPLIT_PROMPT = """\
The memory cluster "{cluster}" of {name} has grown to {count} memories. Split it into topic \
groups of at least {min_part} memories each; leave at least {min_remaining} memories in \
"{cluster}" (leave out the memories that belong there).

<<<BEGIN MEMORIES>>>
{lines}
<<<END MEMORIES>>>

Reply with JSON: {{"groups": [{{"name": "short topic title", "nodes": ["n1", "n2"]}}]}}"""

DIARY_PROMPT = """\
You are {name}. These are the scenes you lived through since your last diary entry:

<<<BEGIN MEMORIES>>>
{lines}
<<<END MEMORIES>>>

Write in the first person:
- "diary": a diary entry for {date}, 3 to 5 lines;
- "think": 3 to 7 short notes on what you noticed or want to remember next time.
Reply with JSON: {{"diary": "line 1\\nline 2\\nline 3", "think": ["note", "note", "note"]}}"""

REPAIR_PROMPT = """\
This scene note could not be read ({error}). Rewrite it as one valid JSON object with the \
fields action (string), actors (list of names), when (list of "YYYY-MM-DD" dates), and \
optionally setting, dialogue (list), sensory (list), feeling (first person), importance \
(0-1), themes (list), emotion (valence, arousal, dominance, safety, novelty, trust: -1 to 1).
Keep its meaning; invent nothing.

<<<BEGIN NOTE>>>
{text}
<<<END NOTE>>>"""


def label_nodes(node_list):
    """Short labels for a prompt (`n1`, `n2`...) -> node ids; models mangle long ids."""
    return {f"n{number}": node["id"] for number, node in enumerate(node_list, 1)}


def node_line(label, node, with_status=False):
    """One node as a prompt line: `[n1] date — setting — action ...`, optionally its status."""
    text = " ".join(defuse(scene_to_text(node), 400).split())  # one line: labels can't be forged
    if with_status:
        status = "fresh" if node.get("fresh") else node.get("status", ACTIVE)
        return f"[{label}] {status} — {text}"
    return f"[{label}] {text}"


def ask_json(ports, prompt, purpose, expect=dict):
    """One LLM call whose reply must be JSON; Deferred[dict or list]."""
    system = PATROL_SYSTEM.format(name=ports.name)
    deferred = complete_text(ports.llm, prompt, system=system, purpose=purpose)
    return deferred.addCallback(parse_json_reply, expect=expect)
