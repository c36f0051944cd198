"""
The memory patrol: each step on hand-built nodes with known vectors, decay and
revival over many patrols, mechanical mode, PARSE_FAILED repair, once-per-sleep scheduling,
isolation, and a 200-scene run through ten patrols against the scripted LLM server.
"""

import json
import re
import uuid

import numpy as np
import pytest
from scripted_llm import Reply, drive, sync_runner
from support import make_ports
from test_nodes import DIMS, FakeEmbedder, axis_vector, mix, result_of, scene
from twisted.internet import defer, task

from ai_assistant.memory import node_vectors, nodes
from ai_assistant.memory.nodes import ACTIVE, DEAD, DYING, PARSE_FAILED, Nodes, recompute_centroids
from ai_assistant.plumbing import documents
from ai_assistant.plumbing.llm import LLMClient
from ai_assistant.plumbing.ports import AssistantPorts, FixedClock, MemoryState
from ai_assistant.plumbing.settings import DEFAULTS, Settings, deep_merge
from ai_assistant.sleep import patrol
from ai_assistant.tools.nodes import search_nodes
from ai_assistant.workspace.status import format_nodes_overview, format_patrol_report


@pytest.fixture
def embedder():
    fake = FakeEmbedder()
    previous = node_vectors.set_embedding(fake, sync_runner)
    yield fake
    node_vectors.set_embedding(**previous)


@pytest.fixture
def llm_ports(llm_config):
    """Ports whose LLM is the real client talking to the scripted server, synchronously."""

    def factory(state=None, key=None, settings=None):
        tree = deep_merge(deep_merge(DEFAULTS, {"llm": llm_config}), settings or {})
        key = key or f"ada-{uuid.uuid4().hex}"
        state = state or MemoryState()
        ports = make_ports(settings, state=state, key=key)
        ports.settings = Settings(tree)
        ports.reactor_clock = task.Clock()
        ports.llm = LLMClient(tree["llm"], npc_key=key, npc_name="Ada", state=state,
                              log=ports.log, runner=sync_runner, clock=ports.reactor_clock)
        return ports

    return factory


def run_patrol(ports):
    return drive(patrol.run_patrol(ports), getattr(ports, "reactor_clock", None))


def prompt_of(request):
    return request["messages"][-1]["content"]


def build_graph(ports, cluster_specs, node_specs):
    """
    Write clusters and nodes straight into state.

    cluster_specs: {name: {"parent": root name or None}}; node_specs: list of dicts with
    "id", "cluster" (name), "vector" and any node fields to override.
    """
    clusters, ids = {}, {}
    for name, spec in cluster_specs.items():
        if spec.get("parent") is None:
            ids[name] = nodes.ensure_root(clusters, name, "2025-01-01T00:00:00Z")
    for name, spec in cluster_specs.items():
        if spec.get("parent") is not None:
            ids[name] = nodes.new_sub_cluster(clusters, name, ids[spec["parent"]],
                                              f"2025-01-01T00:00:0{len(ids)}Z")
    graph, vectors = {}, {"dims": DIMS, "nodes": {}, "clusters": {}}
    for spec in node_specs:
        spec = dict(spec)
        vector = spec.pop("vector")
        cluster = spec.pop("cluster")
        parsed = nodes.parse_scene_input(scene(spec.pop("action", spec["id"]),
                                               when=spec.pop("when", ["2025-01-01"])))
        node = nodes.new_node(spec["id"], parsed, cluster_id=ids[cluster],
                              now="2025-01-01T00:00:00Z")
        node["fresh"] = False
        node.update(spec)
        graph[node["id"]] = node
        vectors["nodes"][node["id"]] = node_vectors.encode_vector(node_vectors.unit(vector))
    recompute_centroids(graph, vectors, ids.values())
    ports.state.set(documents.MEMORY_NODES, graph)
    ports.state.set(documents.MEMORY_CLUSTERS, clusters)
    Nodes(ports).save_graph(vectors=vectors)
    return ids


def graph(ports):
    return ports.state.get(documents.MEMORY_NODES), ports.state.get(documents.MEMORY_CLUSTERS)


# ----------------------------------------------------------------------------------------------
# Scene notes -> nodes


def test_notes_become_fresh_nodes_filed_by_similarity_or_root(embedder):
    ports = make_ports()
    ids = build_graph(ports, {"Business": {}, "Bread": {"parent": "Business"}}, [
        {"id": "b1", "cluster": "Bread", "vector": axis_vector(0)},
        {"id": "b2", "cluster": "Bread", "vector": axis_vector(0)},
        {"id": "b3", "cluster": "Bread", "vector": axis_vector(0)},
    ])
    embedder.table = {"loaf": mix((0, 0.4501), (1, (1 - 0.4501 ** 2) ** 0.5)),  # just above
                      "crumb": mix((0, 0.4499), (1, (1 - 0.4499 ** 2) ** 0.5)),  # just below
                      "dragon": axis_vector(5)}
    for action in ("bought a loaf", "swept a crumb", "saw a dragon"):
        Nodes(ports).add_scene_note(scene(action, feeling="curious", importance=0.7))
    report = result_of(patrol.convert_scene_notes(ports))

    assert report == {"converted": 3, "parse_failed": 0, "repaired": 0, "matched": 1,
                      "classified": 2}
    assert len(embedder.calls) == 1 and len(embedder.calls[0]) == 3  # one batch
    graph_nodes, clusters = graph(ports)
    new = {n["scene"]["action"]: n for n in graph_nodes.values() if n["fresh"]}
    assert new["bought a loaf"]["cluster_id"] == ids["Bread"]  # >= threshold
    assert new["swept a crumb"]["cluster_id"] == ids["Business"]  # below: classified
    assert new["saw a dragon"]["cluster_id"] == ids["Business"]  # mechanical: Business
    assert new["bought a loaf"]["importance"] == 0.7 and new["bought a loaf"]["status"] == ACTIVE
    assert ports.state.get(documents.SCENE_NOTES) == []
    # the centroid now includes the new member
    doc = Nodes(ports).vectors()
    centroid = node_vectors.cluster_vector(doc, ids["Bread"])
    expected = node_vectors.unit(np.mean([axis_vector(0)] * 3 + [embedder.table["loaf"]], axis=0))
    assert np.allclose(centroid, expected, atol=1e-6)
    assert node_vectors.cluster_vector(doc, ids["Business"]) is not None


def test_unmatched_nodes_are_classified_by_the_llm(embedder, llm_ports, llm_server):
    ports = llm_ports()
    Nodes(ports).add_scene_note(scene("Had tea with my friend Bob"))
    Nodes(ports).add_scene_note(scene("Counted the guild's coins"))
    llm_server.script(Reply.text('{"1": "Private", "2": "Business"}'))
    report = drive(patrol.convert_scene_notes(ports), ports.reactor_clock)
    assert report["classified"] == 2
    graph_nodes, clusters = graph(ports)
    by_action = {n["scene"]["action"]: clusters[n["cluster_id"]]["name"]
                 for n in graph_nodes.values()}
    assert by_action == {"Had tea with my friend Bob": "Private",
                         "Counted the guild's coins": "Business"}
    assert "Classify each memory" in prompt_of(llm_server.requests[0])


# ----------------------------------------------------------------------------------------------
# Decay, dying and revival over many patrols


def test_decay_dying_and_revival_arithmetic_over_many_patrols(embedder):
    ports = make_ports()
    Nodes(ports).add_scene_note(scene("waved at Bob", importance=0.5))
    Nodes(ports).add_scene_note(scene("the oath", importance=0.5))
    run_patrol(ports)
    graph_nodes = ports.state.get(documents.MEMORY_NODES)
    oath = next(n for n in graph_nodes.values() if n["scene"]["action"] == "the oath")
    oath["pinned"] = True
    ports.state.set(documents.MEMORY_NODES, graph_nodes)

    def status(action):
        return next(n for n in ports.state.get(documents.MEMORY_NODES).values()
                    if n["scene"]["action"] == action)

    for _ in range(68):  # 69 patrols: 0.5 * exp(-69/30) = 0.0501 > 0.05
        run_patrol(ports)
    assert status("waved at Bob")["session_count"] == 69
    assert status("waved at Bob")["status"] == ACTIVE
    run_patrol(ports)  # 70: 0.5 * exp(-70/30) = 0.0485 <= 0.05
    assert status("waved at Bob")["status"] == DYING
    assert status("the oath")["status"] == ACTIVE  # pinned nodes never decay
    run_patrol(ports)
    assert status("waved at Bob")["session_count"] == 70  # dying nodes are not counted
    assert status("waved at Bob")["status"] == DYING  # mechanical: nothing kills or revives

    search_nodes(ports, "waved")  # +1 on a live node: 0.5 * exp(-69/30) > 0.05
    assert status("waved at Bob")["reactivation_count"] == 1
    report = run_patrol(ports)
    assert report["steps"]["revival"]["revived"] == 1
    assert status("waved at Bob")["status"] == ACTIVE
    run_patrol(ports)  # counted again: 71 - 1 = 70 -> dying again
    assert status("waved at Bob")["status"] == DYING


def test_dead_nodes_revive_only_when_recalls_lift_them_above_the_threshold():
    ports = make_ports()
    build_graph(ports, {"Business": {}}, [
        {"id": "old", "cluster": "Business", "vector": axis_vector(0), "status": DEAD,
         "session_count": 75, "importance": 0.5},
        {"id": "absorbed", "cluster": "Business", "vector": axis_vector(1), "status": DEAD,
         "session_count": 1, "importance": 0.9, "merged_into": "x"},
    ])
    assert patrol.revive_nodes(ports) == {"revived": 0}  # absorbed: eff high but never recalled
    search_nodes(ports, "old")  # dead: +2 -> 0.5 * exp(-73/30) = 0.044
    assert ports.state.get(documents.MEMORY_NODES)["old"]["reactivation_count"] == 2
    assert patrol.revive_nodes(ports) == {"revived": 0}
    search_nodes(ports, "old")
    search_nodes(ports, "old")  # +6 in all -> 0.5 * exp(-69/30) = 0.0501
    report = patrol.revive_nodes(ports)
    assert report["revived"] == 1 and report["ids"] == ["old"]
    assert ports.state.get(documents.MEMORY_NODES)["old"]["status"] == ACTIVE
    assert ports.state.get(documents.MEMORY_NODES)["absorbed"]["status"] == DEAD
    # the revived node counts in its cluster's centroid again
    doc = Nodes(ports).vectors()
    old = ports.state.get(documents.MEMORY_NODES)["old"]
    assert np.allclose(node_vectors.cluster_vector(doc, old["cluster_id"]), axis_vector(0))


# ----------------------------------------------------------------------------------------------
# Consolidation


def consolidation_graph(ports):
    return build_graph(ports, {"Business": {}, "Bread": {"parent": "Business"}}, [
        {"id": "a", "cluster": "Bread", "vector": axis_vector(0), "fresh": True,
         "action": "bought bread", "importance": 0.98},
        {"id": "b", "cluster": "Bread", "vector": axis_vector(0), "fresh": True,
         "action": "bought bread again", "when": ["2025-01-03"]},
        {"id": "c", "cluster": "Bread", "vector": axis_vector(1), "status": DYING,
         "action": "dropped a crumb"},
        {"id": "d", "cluster": "Bread", "vector": axis_vector(2), "status": DYING,
         "action": "smelled yeast"},
        {"id": "e", "cluster": "Bread", "vector": axis_vector(3), "action": "kneaded dough"},
        {"id": "z", "cluster": "Business", "vector": axis_vector(4), "action": "elsewhere"},
    ])


def test_consolidation_merges_kills_and_resets_fresh(embedder, llm_ports, llm_server):
    ports = llm_ports()
    consolidation_graph(ports)
    labels = {}

    def responder(request):
        for label, action in re.findall(r"^\[(n\d+)\] \w+ — [^—]+ — (.+)$",
                                        prompt_of(request), re.M):
            labels[action] = label
        return Reply.text(json.dumps({
            "merges": [{"survivor": labels["bought bread"],
                        "absorbed": [labels["bought bread again"], "n99"]},
                       {"survivor": "n99", "absorbed": [labels["kneaded dough"]]}],
            "make_dead": [labels["dropped a crumb"], labels["kneaded dough"]],
        }))

    llm_server.responder = responder
    report = drive(patrol.consolidate_clusters(ports), ports.reactor_clock)
    assert report == {"clusters": 1, "merged": 1, "absorbed": 1, "made_dead": 1,
                      "reembedded": 1}
    graph_nodes = ports.state.get(documents.MEMORY_NODES)
    survivor, absorbed = graph_nodes["a"], graph_nodes["b"]
    assert survivor["importance"] == 1.0  # 0.98 + 0.05, capped
    assert survivor["scene"]["when"] == [
        "2025-01-01", {"date": "2025-01-03", "action": "bought bread again"}]
    assert absorbed["status"] == DEAD and absorbed["merged_into"] == "a"
    assert graph_nodes["c"]["status"] == DEAD  # dying, no partner, make_dead
    assert graph_nodes["d"]["status"] == DYING  # not named: stays dying
    assert graph_nodes["e"]["status"] == ACTIVE  # make_dead only takes dying nodes
    assert not any(n["fresh"] for n in graph_nodes.values())
    assert "stale_vector" not in survivor
    assert embedder.calls[-1] == [nodes.node_embed_text(survivor)]  # re-embedded
    assert len(llm_server.requests) == 1  # only the cluster with fresh/dying nodes


def test_failed_consolidation_keeps_everything_for_the_next_patrol(embedder, llm_ports,
                                                                   llm_server):
    ports = llm_ports(settings={"llm": {"max_retries": 0}})
    consolidation_graph(ports)
    before = json.loads(json.dumps(ports.state.get(documents.MEMORY_NODES)))
    llm_server.script(Reply.text("I would merge the bread ones."))  # no JSON
    report = drive(patrol.consolidate_clusters(ports), ports.reactor_clock)
    assert report["clusters"] == 0 and len(report["errors"]) == 1
    assert ports.state.get(documents.MEMORY_NODES) == before  # fresh flags intact: retried later


# ----------------------------------------------------------------------------------------------
# Split


def test_split_creates_valid_parts_only(embedder, llm_ports, llm_server):
    ports = llm_ports()
    specs = [{"id": f"s{i}", "cluster": "Bread", "vector": axis_vector(i % 3),
              "action": f"bread scene {i}"} for i in range(12)]
    ids = build_graph(ports, {"Business": {}, "Bread": {"parent": "Business"}}, specs)
    llm_server.script(Reply.text(json.dumps({"groups": [
        {"name": "Rye", "nodes": ["n1", "n2", "n3"]},
        {"name": "Lonely", "nodes": ["n4"]},  # fewer than 2: refused
        {"name": "Greedy", "nodes": [f"n{i}" for i in range(4, 12)]},  # would leave 1
        {"name": "Pair", "nodes": ["n4", "n5", "n99"]},
    ]})))
    report = drive(patrol.split_large_clusters(ports), ports.reactor_clock)
    assert report == {"split": 1, "created": 2}
    graph_nodes, clusters = graph(ports)
    by_name = {c["name"]: c for c in clusters.values()}
    assert set(by_name) == {"Business", "Bread", "Rye", "Pair"}
    assert by_name["Rye"]["parent_id"] == ids["Business"] and not by_name["Rye"]["is_parent"]
    members = {name: sorted(n["id"] for n in graph_nodes.values()
                            if n["cluster_id"] == c["id"]) for name, c in by_name.items()}
    assert members["Rye"] == ["s0", "s1", "s2"] and members["Pair"] == ["s3", "s4"]
    assert len(members["Bread"]) == 7
    rye = by_name["Rye"]["id"]
    assert node_vectors.cluster_vector(Nodes(ports).vectors(), rye) is not None


def test_roots_are_never_split_but_topics_are_carved_out(embedder, llm_ports, llm_server):
    ports = llm_ports()
    specs = [{"id": f"r{i}", "cluster": "Private", "vector": axis_vector(i % 2)}
             for i in range(11)]
    ids = build_graph(ports, {"Private": {}}, specs)
    llm_server.script(Reply.text(json.dumps({"groups": [
        {"name": "Evens", "nodes": [f"n{i}" for i in range(1, 12, 2)]},
        {"name": "Odds", "nodes": [f"n{i}" for i in range(2, 12, 2)]},
    ]})))
    assert drive(patrol.split_large_clusters(ports), ports.reactor_clock)["created"] == 2
    graph_nodes, clusters = graph(ports)
    assert ids["Private"] in clusters and clusters[ids["Private"]]["is_parent"]
    assert {c["parent_id"] for c in clusters.values()} == {ids["Private"]}
    assert not any(n["cluster_id"] == ids["Private"] for n in graph_nodes.values())


# ----------------------------------------------------------------------------------------------
# Small clusters


def test_small_clusters_merge_into_similar_sibling_else_root_and_empty_ones_go():
    ports = make_ports()
    ids = build_graph(ports, {
        "Business": {}, "Small": {"parent": "Business"}, "Near": {"parent": "Business"},
        "Far": {"parent": "Business"}, "Alone": {"parent": "Business"},
        "Empty": {"parent": "Business"},
    }, [
        {"id": "s1", "cluster": "Small", "vector": mix((0, 1.0), (1, 0.5))},
        {"id": "s2", "cluster": "Small", "vector": axis_vector(0)},
        *[{"id": f"n{i}", "cluster": "Near", "vector": mix((0, 1.0), (2, 0.3))}
          for i in range(3)],
        *[{"id": f"f{i}", "cluster": "Far", "vector": axis_vector(5)} for i in range(3)],
        {"id": "a1", "cluster": "Alone", "vector": axis_vector(9)},
        {"id": "a2", "cluster": "Alone", "vector": axis_vector(9), "status": DEAD},
    ])
    report = patrol.merge_small_clusters(ports)
    assert report == {"deleted": 1, "merged_into_sibling": 1, "merged_into_root": 1}
    graph_nodes, clusters = graph(ports)
    assert {c["name"] for c in clusters.values()} == {"Business", "Near", "Far"}
    assert graph_nodes["s1"]["cluster_id"] == graph_nodes["s2"]["cluster_id"] == ids["Near"]
    assert graph_nodes["a1"]["cluster_id"] == graph_nodes["a2"]["cluster_id"] == ids["Business"]
    doc = Nodes(ports).vectors()
    assert set(doc["clusters"]) == {ids["Business"], ids["Near"], ids["Far"]}


# ----------------------------------------------------------------------------------------------
# diary, think notes, mechanical mode


def test_diary_and_think_notes(embedder, llm_ports, llm_server):
    ports = llm_ports()
    Nodes(ports).add_scene_note(scene("Bob told me a joke"))
    llm_server.responder = lambda request: (
        Reply.text(json.dumps({"diary": "\n".join(f"line {i}" for i in range(7)),
                               "think": ["- Bob is funny", "ask about his farm", "be kind",
                                         "", "x", "y", "z", "w"]}))
        if "diary entry" in prompt_of(request) else Reply.text("{}")
    )
    report = run_patrol(ports)
    assert report["steps"]["diary"] == {"diary": True, "diary_lines": 5, "think": 7}
    diary = ports.state.get(documents.DIARY)
    assert list(diary) == ["2025-01-01"]
    assert diary["2025-01-01"]["text"].splitlines() == [f"line {i}" for i in range(5)]
    think = ports.state.get(documents.THINK_NOTES)
    assert think["bullets"][:2] == ["Bob is funny", "ask about his farm"]
    assert think["text"].startswith("- Bob is funny\n- ask about his farm")
    assert ports.state.get(documents.PATROL_STATE)["diary_pending"] == []
    diary_prompt = next(prompt_of(r) for r in llm_server.requests
                        if "diary entry" in prompt_of(r))
    assert "Bob told me a joke" in diary_prompt


def test_failed_diary_stays_pending(embedder, llm_ports, llm_server):
    ports = llm_ports(settings={"llm": {"max_retries": 0}})
    Nodes(ports).add_scene_note(scene("Bob told me a joke"))
    llm_server.responder = lambda request: Reply.error(400) if "diary entry" in prompt_of(
        request) else Reply.text("{}")
    report = run_patrol(ports)
    assert "error" in report["steps"]["diary"]
    assert len(ports.state.get(documents.PATROL_STATE)["diary_pending"]) == 1
    assert ports.state.get(documents.DIARY) is None


def test_mechanical_mode_logs_one_line_and_runs_the_mechanical_steps(embedder):
    ports = make_ports()
    Nodes(ports).add_scene_note(scene("waved"))
    report = run_patrol(ports)
    assert ports.log.count(
        "[graph] no LLM configured: skipping consolidation, split, the diary and the think "
        "notes (mechanical processing only)"
    ) == 1
    steps = report["steps"]
    for skipped in ("consolidation", "split", "diary"):
        assert steps[skipped] == {"skipped": "mechanical mode"}
    assert steps["notes"]["converted"] == 1 and steps["session_counts"] == {"incremented": 1}
    assert steps["dying"] == {"dying": 0} and steps["revival"] == {"revived": 0}
    assert "deleted" in steps["small_clusters"]
    assert ports.state.get(documents.DIARY) is None
    text = format_patrol_report(report)
    assert "mechanical" in text and "scene notes -> nodes: converted 1" in text


# ----------------------------------------------------------------------------------------------
# PARSE_FAILED


def test_parse_failed_notes_are_kept_then_converted_once_valid(embedder):
    ports = make_ports()
    Nodes(ports).add_scene_note('{"action": "Bob waved", "actors": ["Bob"]')  # truncated
    report = run_patrol(ports)
    assert report["steps"]["notes"]["parse_failed"] == 1
    notes = ports.state.get(documents.SCENE_NOTES)
    assert len(notes) == 1 and notes[0]["status"] == PARSE_FAILED
    assert not ports.state.get(documents.MEMORY_NODES)
    notes[0]["text"] += "}"  # fixed (by an admin or another pass)
    ports.state.set(documents.SCENE_NOTES, notes)
    report = run_patrol(ports)
    assert report["steps"]["notes"]["converted"] == 1
    assert ports.state.get(documents.SCENE_NOTES) == []
    (node,) = ports.state.get(documents.MEMORY_NODES).values()
    assert node["scene"]["action"] == "Bob waved"
    assert node["scene"]["when"] == ["2025-01-01"]  # the note's own date


def test_llm_repairs_parse_failed_notes(embedder, llm_ports, llm_server):
    ports = llm_ports()
    Nodes(ports).add_scene_note("Bob waved at me, I felt happy (no json here)")

    def responder(request):
        prompt = prompt_of(request)
        if "could not be read" in prompt:
            assert "Bob waved at me" in prompt
            return Reply.text('```json\n{"action": "Bob waved", "actors": ["Bob"], '
                              '"when": ["2025-01-01"], "feeling": "happy"}\n```')
        return Reply.text("{}")

    llm_server.responder = responder
    report = run_patrol(ports)
    assert report["steps"]["notes"] == {"converted": 1, "parse_failed": 0, "repaired": 1,
                                        "matched": 0, "classified": 1}
    (node,) = ports.state.get(documents.MEMORY_NODES).values()
    assert node["feeling"] == "happy"
    assert ports.state.get(documents.SCENE_NOTES) == []


# ----------------------------------------------------------------------------------------------
# scheduling, isolation, concurrency


def test_run_patrol_if_due_runs_once_per_sleep(embedder):
    ports = make_ports()
    assert result_of(patrol.run_patrol_if_due(ports)) == {"skipped": "not asleep"}
    ports.state.set(documents.SLEEP_STATE, {"started_at": "2025-01-01T02:00:00Z", "ticks": 3})
    assert result_of(patrol.run_patrol_if_due(ports)) == {"skipped": "nothing to patrol"}
    Nodes(ports).add_scene_note(scene("waved"))
    first = result_of(patrol.run_patrol_if_due(ports))
    assert first["steps"]["notes"]["converted"] == 1
    assert result_of(patrol.run_patrol_if_due(ports)) == {
        "skipped": "already patrolled this sleep"}
    ports.state.set(documents.SLEEP_STATE, {"started_at": "2025-01-02T02:00:00Z"})
    second = result_of(patrol.run_patrol_if_due(ports))  # nodes alone make it due
    assert second["steps"]["session_counts"] == {"incremented": 1}
    assert ports.state.get(documents.PATROL_STATE)["runs"] == 2


def test_a_second_patrol_while_one_runs_is_refused(embedder):
    ports = make_ports()
    Nodes(ports).add_scene_note(scene("waved"))
    pending = defer.Deferred()
    running = patrol.run_patrol(ports, runner=lambda func, *args: pending)
    assert result_of(patrol.run_patrol(ports))["skipped"].startswith("a patrol is already")
    pending.callback(FakeEmbedder().embed(["waved"]))
    assert result_of(running)["steps"]["notes"]["converted"] == 1
    assert not result_of(patrol.run_patrol(ports)).get("skipped")


def test_two_assistants_are_isolated(embedder):
    ada, bea = make_ports(key="ada"), make_ports(key="bea")
    Nodes(ada).add_scene_note(scene("Ada's secret"))
    Nodes(bea).add_scene_note(scene("Bea's chores"))
    Nodes(bea).add_scene_note(scene("Bea's garden"))
    run_patrol(ada)
    run_patrol(bea)
    ada_nodes = ada.state.get(documents.MEMORY_NODES)
    bea_nodes = bea.state.get(documents.MEMORY_NODES)
    assert [n["scene"]["action"] for n in ada_nodes.values()] == ["Ada's secret"]
    assert sorted(n["scene"]["action"] for n in bea_nodes.values()) == [
        "Bea's chores", "Bea's garden"]
    assert set(Nodes(ada).vector_index().ids) == set(ada_nodes)
    assert set(Nodes(bea).vector_index().ids) == set(bea_nodes)
    assert not set(ada.state.get(documents.MEMORY_CLUSTERS)) & set(
        bea.state.get(documents.MEMORY_CLUSTERS))
    assert search_nodes(bea, "secret") == []


# ----------------------------------------------------------------------------------------------
# 200 scenes, ten patrols


class TopicEmbedder(FakeEmbedder):
    """`topic-T` gives axis T; `#I` adds a small axis of its own, so topics are clear."""

    name = "topics"

    def __init__(self):
        super().__init__(dims=256)

    def vector_for(self, text):
        topic = int(re.search(r"topic-(\d)", text).group(1))
        own = int(re.search(r"#(\d+)", text).group(1))
        return mix((topic, 1.0), (10 + own, 0.3), dims=256)


def scene_input(i):
    topic = i % 5
    kind = "friend" if topic < 2 else "work"
    pair = i - 5 if i % 10 == 9 else i
    action = f"{kind} event topic-{topic} #{i}" + (f" dup{pair}" if i % 10 in (4, 9) else "")
    return scene(action, when=[f"2025-01-{1 + i // 20:02d}"], feeling=f"felt {kind}",
                 importance=0.05 if i % 25 == 0 else 0.5, themes=[kind])


def topic_responder(request):
    prompt = prompt_of(request)
    if prompt.startswith("Classify"):
        lines = re.findall(r"^\[(\d+)\] (.*)$", prompt, re.M)
        return Reply.text(json.dumps(
            {number: "Private" if "friend" in text else "Business" for number, text in lines}))
    if prompt.startswith("Consolidate"):
        lines = re.findall(r"^\[(n\d+)\] (\w+) — (.*)$", prompt, re.M)
        pairs, merged, merges = {}, set(), []
        for label, _, text in lines:
            found = re.search(r"dup(\d+)", text)
            if found:
                pairs.setdefault(found.group(1), []).append(label)
        for labels in pairs.values():
            if len(labels) > 1:
                merges.append({"survivor": labels[0], "absorbed": labels[1:]})
                merged.update(labels)
        dead = [label for label, status, _ in lines if status == "dying" and label not in merged]
        return Reply.text(json.dumps({"merges": merges, "make_dead": dead}))
    if prompt.startswith("The memory cluster"):
        groups = {}
        for label, text in re.findall(r"^\[(n\d+)\] (.*)$", prompt, re.M):
            groups.setdefault(re.search(r"topic-(\d)", text).group(1), []).append(label)
        return Reply.text(json.dumps({"groups": [
            {"name": f"Topic {topic}", "nodes": labels} for topic, labels in groups.items()]}))
    if "diary entry" in prompt:
        return Reply.text(json.dumps({"diary": "Busy day.\nMet friends.\nWorked hard.",
                                      "think": ["friends matter", "work piles up", "rest"]}))
    return Reply.text("{}")


def test_two_hundred_scenes_through_ten_patrols(llm_ports, llm_server):
    topic_embedder = TopicEmbedder()
    previous = node_vectors.set_embedding(topic_embedder, sync_runner)
    try:
        ports = llm_ports()
        llm_server.responder = topic_responder
        for batch in range(10):
            for i in range(batch * 20, batch * 20 + 20):
                Nodes(ports).add_scene_note(scene_input(i))
            report = run_patrol(ports)
            assert not any("error" in step for step in report["steps"].values()), report
    finally:
        node_vectors.set_embedding(**previous)

    graph_nodes, clusters = graph(ports)
    assert ports.state.get(documents.SCENE_NOTES) == []
    assert len(graph_nodes) == 200
    by_number = {int(re.search(r"#(\d+)", n["scene"]["action"]).group(1)): n
                 for n in graph_nodes.values()}
    absorbed = [n for n in graph_nodes.values() if n.get("merged_into")]
    assert len(absorbed) == 20  # every dup pair merged once
    for node in absorbed:
        survivor = graph_nodes[node["merged_into"]]
        assert survivor["status"] == ACTIVE and survivor["importance"] == pytest.approx(0.55)
        assert {"date": node["scene"]["when"][0], "action": node["scene"]["action"]} in (
            survivor["scene"]["when"])
    made_dead = [n for n in graph_nodes.values() if n["status"] == DEAD
                 and not n.get("merged_into")]
    assert sorted(n["importance"] for n in made_dead) == [0.05] * 8
    assert sum(1 for n in graph_nodes.values() if n["status"] == ACTIVE) == 172
    assert not any(n["fresh"] for n in graph_nodes.values())
    assert by_number[1]["session_count"] == 10  # a first-patrol scene, counted every patrol

    roots = {c["name"]: c["id"] for c in clusters.values() if c["is_parent"]}
    assert set(roots) == {"Business", "Private"}
    subs = [c for c in clusters.values() if not c["is_parent"]]
    assert len(subs) >= 3
    vectors = Nodes(ports).vectors()
    for cluster in clusters.values():
        active = nodes.cluster_members(graph_nodes, cluster["id"], (ACTIVE,))
        if not cluster["is_parent"]:
            assert len(active) > 2  # small clusters are merged away
            topics = {re.search(r"topic-(\d)", n["scene"]["action"]).group(1) for n in active}
            assert len(topics) == 1 and cluster["name"] == f"Topic {topics.pop()}"
        if active:
            expected = node_vectors.unit(np.mean(
                [node_vectors.decode_vector(vectors["nodes"][n["id"]]) for n in active], axis=0))
            assert np.allclose(node_vectors.cluster_vector(vectors, cluster["id"]), expected,
                               atol=1e-5)
    for node in graph_nodes.values():
        cluster = clusters[node["cluster_id"]]
        root = cluster["id"] if cluster["is_parent"] else cluster["parent_id"]
        private = "friend" in node["scene"]["action"]
        assert root == roots["Private" if private else "Business"]

    assert ports.state.get(documents.DIARY)["2025-01-01"]["text"].count("\n") == 2
    assert ports.state.get(documents.THINK_NOTES)["bullets"] == ["friends matter", "work piles up",
                                                             "rest"]
    overview = format_nodes_overview(ports)
    assert "200 (172 active, 0 dying, 28 dead)" in overview and "Topic" in overview


def test_dimensions_follow_the_embedder():
    ports = AssistantPorts(key="k", name="Ada", state=MemoryState(), clock=FixedClock(),
                           settings=Settings(DEFAULTS))
    previous = node_vectors.set_embedding(FakeEmbedder(dims=16), sync_runner)
    try:
        Nodes(ports).add_scene_note(scene("waved"))
        result_of(patrol.run_patrol(ports))
    finally:
        node_vectors.set_embedding(**previous)
    assert Nodes(ports).vector_index().matrix.shape == (1, 16)
    assert Nodes(ports).vectors()["dims"] == 16
