"""
What a settled start holds is left out of the garbage collector's full passes, when the game asks
for it (`threads.gc_freeze`, `threads.freeze_held_objects`).
"""

import gc

from ai_assistant.plumbing import threads
from ai_assistant.plumbing.settings import DEFAULTS, Settings


def test_held_objects_are_frozen_only_when_the_game_asks():
    before = gc.get_freeze_count()
    held = ["a list the process holds"]
    assert threads.freeze_held_objects(Settings(DEFAULTS, {})) == 0
    assert gc.get_freeze_count() == before and any(held is found for found in gc.get_objects())
    try:
        frozen = threads.freeze_held_objects(Settings(DEFAULTS, {"threads.gc_freeze": True}))
        assert frozen > before and gc.get_freeze_count() > before
        # the collector's generations no longer hold it: its full passes skip it
        assert not any(held is found for found in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(held is found for found in gc.get_objects())
