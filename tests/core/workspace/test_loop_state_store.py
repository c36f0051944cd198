"""The ReAct loop's record of itself (`workspace.loop_state.LoopState`)."""

from support import make_ports

from ai_assistant.plumbing import documents
from ai_assistant.workspace.loop_state import LoopState, empty_loop_state


def test_a_step_records_where_the_cycle_stands_and_keeps_the_last_prompt_size():
    ports = make_ports()
    loop = LoopState(ports)
    assert loop.current() == {} and loop.last_unanswered() is None
    loop.record_step(iteration=1, max_iterations=4, tools=["recall_scenes"], chain_depth=1,
                     in_chain=True, pending=["say"], context_tokens=900)
    loop.record_step(iteration=2, max_iterations=4, tools=["recall_scenes", "say"],
                     chain_depth=0, in_chain=False, pending=[])
    assert loop.current() == {**empty_loop_state(4), "iteration": 2,
                              "tools_this_cycle": ["recall_scenes", "say"],
                              "tool_count_this_cycle": 2, "last_context_tokens": 900}


def test_tool_calls_are_counted_for_the_session():
    ports = make_ports()
    loop = LoopState(ports)
    loop.count_tool(True)
    ports.clock.advance(minutes=5)
    loop.count_tool(False)
    loop.count_tool(True)
    assert loop.metrics() == {"total_tool_calls": 3, "successful_calls": 2, "failed_calls": 1,
                              "session_start": "2025-01-01T12:00:00Z"}


def test_the_last_person_left_unanswered_survives_the_next_steps():
    ports = make_ports()
    loop = LoopState(ports)
    loop.record_unanswered("Bob", "max_iterations")
    loop.record_step(iteration=1, max_iterations=5, tools=[], chain_depth=0, in_chain=False,
                     pending=[])
    assert loop.last_unanswered() == {"time": "2025-01-01T12:00:00Z", "who": "Bob",
                                      "reason": "max_iterations"}


def test_a_damaged_document_reads_as_empty():
    ports = make_ports()
    ports.state.set(documents.LOOP_STATE, ["not", "a", "dict"])
    ports.state.set(documents.SESSION_METRICS, "garbage")
    assert LoopState(ports).current() == {} and LoopState(ports).metrics() == {}
