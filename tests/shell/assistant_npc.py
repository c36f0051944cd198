"""
The set-up the shell's tests share: an assistant NPC in Evennia's test room, and every
assistant's ticker subscription dropped after each test.

Mix these into Evennia's test cases (`EvenniaTest`, `EvenniaCommandTest`), ahead of them:
`class TestX(WithAda, EvenniaCommandTest)`. They are mixins rather than pytest fixtures
because Evennia's test cases build their rooms in `setUp`, which runs after pytest's fixtures.
"""

from evennia.utils import create

from ai_assistant.commands import all_assistants
from ai_assistant.typeclasses import AssistantCharacter


class StopsAssistants:
    """Drops every assistant's ticker subscription after the test (before Evennia's teardown)."""

    def tearDown(self):
        for npc in all_assistants():
            if npc.assistant.script:
                npc.assistant.script.unsubscribe()
        super().tearDown()


class WithAda(StopsAssistants):
    """`self.npc`: Ada, an assistant at home in `room1`; `self.script`: her script."""

    def setUp(self):
        super().setUp()
        self.npc = create.create_object(AssistantCharacter, key="Ada", location=self.room1,
                                        home=self.room1)
        self.script = self.npc.assistant.script
