"""Status text has one home (`workspace.status`): what admins and the inspector are shown."""

from support import make_ports, result_of

from ai_assistant.memory.patrol_record import PatrolRecord
from ai_assistant.workspace.goals import Goals
from ai_assistant.workspace.mode import DREAMING, Mode
from ai_assistant.workspace.status import format_nodes_overview, inspector_status, status_text


def asleep_with_a_goal():
    ports = make_ports()
    mode = Mode(ports)
    mode.record_tick()
    mode.record_tick()
    mode.skip_tick()
    mode.switch("sleep", "tired")
    mode.set_phase(DREAMING)
    mode.record_sleep_tick({"phase": DREAMING, "time": "2025-01-01T12:00:00Z",
                            "steps": {"patrol": {"skipped": "nothing to patrol"},
                                      "reflection": {"error": "model down"}}})
    Goals(ports).add("Build a tavern")
    return ports


def test_the_admin_status_reads_the_stores_and_takes_what_only_the_game_knows():
    text = status_text(asleep_with_a_goal(), "|wAda|n (#5) in Harbour", 60)
    lines = text.splitlines()
    assert lines[:5] == [
        "|wAda|n (#5) in Harbour",
        "  mode: sleep (phase: dreaming)",
        "  ticker: every 60s",
        "  ticks: 2 (skipped while busy: 1)",
        "  provider: mechanical (no LLM configured)",
    ]
    assert "  journal: 0 entries (consolidated 0); goals: 1; profiles: 0" in lines
    assert lines[-1] == ("  last sleep tick (dreaming, 2025-01-01T12:00:00Z): patrol: "
                         "skipped=nothing to patrol, reflection: |rerror: model down|n")


def test_a_tick_that_has_run_too_long_is_named_beside_the_skipped_ones():
    from ai_assistant.workspace.mode import LONG_TICK_SECONDS

    ports = asleep_with_a_goal()
    # a tick that runs, as ticks do, says nothing
    short = status_text(ports, "Ada", 60, running=("sleep", 3.0)).splitlines()
    assert short[3] == "  ticks: 2 (skipped while busy: 1)"
    stuck = status_text(ports, "Ada", 60, running=("sleep", LONG_TICK_SECONDS + 120))
    assert stuck.splitlines()[3] == ("  ticks: 2 (skipped while busy: 1); "
                                     "|ra sleep tick has run for 12 min and not ended|n")


def test_an_awake_assistant_without_a_ticker_says_so():
    lines = status_text(make_ports(), "Ada", None).splitlines()
    assert lines[1:3] == ["  mode: awake", "  ticker: |rnot subscribed|n"]
    assert not any(line.startswith("  last sleep tick") for line in lines)


def test_the_inspector_header_is_plain_data_from_the_same_stores():
    view = result_of(inspector_status(asleep_with_a_goal()))
    assert (view["mode"], view["phase"], view["ticks"], view["skipped_ticks"]) == (
        "sleep", DREAMING, 2, 1)
    assert view["mechanical"] is True and view["model"] is None
    assert view["counts"]["goals"] == 1 and view["counts"]["long_term_memories"] is None
    assert "id" not in view and "key" not in view  # who and where: the shell's to add


def test_the_nodes_overview_names_the_last_patrol_from_its_record():
    ports = make_ports()
    assert format_nodes_overview(ports).splitlines()[-1] == "Last patrol: never."
    PatrolRecord(ports).record_run({"finished_at": "2025-01-01T13:00:00Z"})
    assert format_nodes_overview(ports).splitlines()[-1] == (
        "Last patrol: 2025-01-01T13:00:00Z.")
