"""
A journal correction made from the inspector reaches the next prompt (issue 32): the entry and
the long-term memory made from it said "eleven"; after the edit, the next real turn's request
to the (scripted) LLM shows "twelve" and no longer "eleven", and the note of the correction is
not in it.
"""

from scripted_llm import Reply
from support import result_of
from test_corrections import FakeSemantic
from test_privacy import clock, hear, make, recall_here, tick, whole_request  # noqa: F401

from ai_assistant.memory import corrections
from ai_assistant.memory.journal import Journal
from ai_assistant.plumbing import documents


def test_the_next_request_shows_the_corrected_fact(llm_server, make, clock):  # noqa: F811
    ports = make()
    ports.semantic = FakeSemantic()
    entry = Journal(ports).add("Captain Mira said the crew of the Gull is eleven sailors.",
                               source_type="direct", source_entity="Mira")
    ports.semantic.add("The crew of the Gull is eleven sailors", metadata={
        "source": "journal", "entry_id": entry["id"], "source_type": "direct",
        "source_entity": "Mira", "timestamp": entry["timestamp"]})
    ports.state.set(documents.MEMORY_LINKS, {
        "m1": {"linked_to": [], "journal_ids": [entry["id"]], "processed_at": None}})

    llm_server.script(Reply.tool("say", {"message": "Let me count."}),
                      Reply.tool("say", {"message": "Twelve."}))
    hear(ports, "talk", "Ada, how big is the crew of the Gull?")
    tick(ports, clock)
    assert "eleven sailors" in whole_request(llm_server.requests[-1])  # before the correction

    record = result_of(corrections.edit_journal_entry(
        ports, entry["id"], "Captain Mira said the crew of the Gull is twelve sailors.",
        by="Bo"))
    assert record["derived"] == ["m1"]

    hear(ports, "talk", "Ada, how many sailors are in the crew of the Gull?")
    tick(ports, clock)
    sent = whole_request(llm_server.requests[-1])
    assert "twelve sailors" in sent
    assert "eleven" not in sent.lower()
    assert "corrected my memory" not in sent  # the note is for staff, not for the prompt
