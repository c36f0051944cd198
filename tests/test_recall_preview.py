"""
The inspector's recall preview (`ai_assistant/web/recall_preview.py`): the "What you remember"
and people blocks it shows are the very blocks the next real turn puts in its request to the
(scripted) LLM, each ranked line with its score, tier, source, audience and flags; the page and
the API show it, and an unknown speaker is a 400.
"""

import pytest
from inspector_fixtures import InspectorTestCase
from support import result_of
from test_privacy import BOB, clock, hear, make, recall_here, tick, whole_request  # noqa: F401

from ai_assistant.memory import entities
from ai_assistant.memory.journal import Journal
from ai_assistant.memory.recall import pipeline
from ai_assistant.plumbing import documents
from ai_assistant.web.recall_preview import UnknownSpeaker, preview

QUESTION = "Ada, where does the harbour master live?"


def test_the_preview_is_the_block_the_next_turn_sends(llm_server, make, clock):  # noqa: F811
    ports = make()
    Journal(ports).add("Alice said the harbour master lives by the east pier.",
                       source_type="direct", source_entity="Alice")
    Journal(ports).add("Bob whispered that the harbour master owes him money.",
                       source_type="direct", source_entity="Bob", audience=BOB["id"])
    Journal(ports).add("A gull stole a fish at the market.")
    llm_server.script(Reply_say("Hello, Bob."), Reply_say("By the east pier."))
    hear(ports, "talk", "Hello Ada, I am Bob the sailor.")
    tick(ports, clock)
    profiles = entities.get_profiles(ports)
    profiles["#2"]["attributes"]["job"] = "sailor on the Gull"
    ports.state.set(documents.ENTITY_PROFILES, profiles)

    shown = result_of(preview(ports, QUESTION, "Bob"))
    assert shown["speaker"] == {"id": "#2", "name": "Bob"}
    assert "east pier" in shown["recall_block"] and "owes him money" in shown["recall_block"]
    assert "job: sailor on the Gull" in shown["people_block"]
    private = next(line for line in shown["lines"] if "owes him money" in line["line"])
    assert private["audience"] == "#2" and "private" in private["flags"]
    assert private["tier"] and private["score"] > 0 and private["in_block"]

    hear(ports, "talk", QUESTION)
    tick(ports, clock)
    sent = whole_request(llm_server.requests[-1])
    assert shown["recall_block"] in sent
    assert shown["people_block"] in sent
    # for someone else the whisper is no part of it
    other = result_of(preview(ports, QUESTION, ""))
    assert "owes him money" not in (other["recall_block"] or "")
    with pytest.raises(UnknownSpeaker):
        result_of(preview(ports, QUESTION, "Zed"))


def Reply_say(message):  # noqa: N802 - reads as the scripted replies do
    from scripted_llm import Reply

    return Reply.tool("say", {"message": message})


class TestRecallPreviewOnTheWebsite(InspectorTestCase):
    def setUp(self):
        super().setUp()
        self.runner, pipeline.RECALL_RUNNER = pipeline.RECALL_RUNNER, sync
        self.addCleanup(setattr, pipeline, "RECALL_RUNNER", self.runner)

    def test_the_api_and_the_page_show_the_preview(self):
        self.client.force_login(self.builder)
        url = f"/api/assistants/{self.npc.id}/recall/"
        shown = self.client.get(url, {"q": "where is the harbour master", "speaker": "Alice"})
        assert shown.status_code == 200, shown.content
        data = shown.json()
        assert data["speaker"]["id"] == "#90" and "harbour master" in data["recall_block"]
        assert all({"score", "tier", "source", "audience", "flags"} <= set(line)
                   for line in data["lines"])
        assert self.client.get(url, {"q": "x", "speaker": "Nobody"}).status_code == 400
        assert self.client.get(url).status_code == 400
        html = self.client.get(f"/assistants/{self.npc.id}/",
                               {"rq": "where is the harbour master", "rspeaker": "Alice"})
        assert 'id="recall-block"' in html.content.decode()
        assert "harbour master" in html.content.decode().split('id="recall-block"')[1][:2000]


def sync(func, *args, **kwargs):
    from twisted.internet import defer

    return defer.maybeDeferred(func, *args, **kwargs)
