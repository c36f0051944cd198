"""
The memory patrol (seed 004, "Patrol Pipeline"): scene notes become memory nodes, nodes decay,
die, merge, revive, and clusters split and merge, then the assistant writes its diary and the
think notes its next conversation starts with.

    ❶ notes -> nodes, embedded in one batch, filed in the best cluster (cosine >= threshold)
       or classified Business/Private by the LLM (Business in mechanical mode)
    ❷ session counts +1 for every active node
    ❸ active nodes with eff_imp <= dying_threshold become dying (pinned nodes never decay)
    ❹ LLM consolidation of clusters holding fresh or dying nodes (merges, make_dead)
    ❺ revival of nodes whose eff_imp rose above the threshold again (recalls lift it)
    ❻ LLM split of clusters with more than split_min_active active nodes
    ❼ mechanical merge of small sub-clusters into their most similar sibling, else their root
    then the diary entry (3-5 lines, today) and think notes (3-7 bullets)

Without an LLM (mechanical mode) ❹, ❻ and diary/think are skipped with the seed's log line.

Every step follows the core's rule: yield the port calls (embedding in the thread pool, LLM
calls) first, then read state, change it and `set` it with no yield in between. A failed LLM
call leaves the nodes as they were (fresh flags stay set, notes stay queued), so the next
patrol retries. The patrol runs once per sleep, in the dreaming phase (`run_patrol_if_due`),
or on demand (`run_patrol`, for `@assistant/patrol <npc>`).

Importing this module registers the memory context blocks (think notes and relationships in
the system message; unread notes and the recent diary as the snapshot; the five most recently
activated nodes), which `ai_assistant.tools.nodes` - and so `load_all_tools()` - imports.

Seed gaps, and how they are resolved here:
- The seed files unmatched nodes in a root and never splits roots, so no sub-cluster would
  ever exist. Here ❻ also *carves* topic sub-clusters out of a root's direct nodes (the root
  itself stays; its parts need `split_min_part` nodes each).
- An absorbed node dies with its importance intact, so the seed's revival rule would revive
  it at once. A dead node is revived only when its reactivation count grew since it died
  ("eff_imp rose above" the threshold); a dying node whenever its eff_imp is above it again
  (in mechanical mode nothing else would ever finish dying).
"""

import json
from datetime import timedelta

from twisted.internet import defer

from ai_assistant.agent.context import register_context_provider
from ai_assistant.memory import nodes as nodes_model
from ai_assistant.memory.nodes import (
    ACTIVE,
    CLUSTERS_DOC,
    DEAD,
    DYING,
    NODES_DOC,
    PARSE_FAILED,
    SCENE_NOTES_DOC,
    SceneError,
    cluster_members,
    effective_importance,
    load_clusters,
    load_nodes,
    load_vectors,
    recompute_centroids,
    save_vectors,
    scene_notes,
    scene_to_text,
    setting,
    threshold,
)
from ai_assistant.plumbing.llm import complete_text
from ai_assistant.plumbing.ports import LLMError, iso, parse_iso
from ai_assistant.plumbing.quoting import defuse, safe_name
from ai_assistant.plumbing.replies import parse_json_reply

PATROL_STATE_DOC = "patrol_state"
DIARY_DOC = "diary"
THINK_DOC = "think_notes"
ENTITY_PROFILES_DOC = "entity_profiles"

MECHANICAL_LOG = "[graph] BYOK key not set: skipping ❹❻ diary/think_md (mechanical processing only)"

_RUNNING = set()

PATROL_SYSTEM = (
    "You maintain the long-term memory of {name}, a character in a text-based game. "
    "Answer with JSON only, exactly in the format asked for."
)

CLASSIFY_PROMPT = """\
Classify each memory of {name} as Business (work, tasks, trade, duties, the game world's \
affairs) or Private (friendships, feelings, personal life).

{lines}

Reply with a JSON object mapping each number to "Business" or "Private", e.g. \
{{"1": "Private", "2": "Business"}}."""

CONSOLIDATE_PROMPT = """\
Consolidate the memories in the cluster "{cluster}" of {name}.
Each line: [label] status — date — setting — action — "dialogue" — (feeling).
fresh = new since the last patrol; dying = fading away; active = settled.

{lines}

Find merge pairs: memories that describe the same event or complete each other. The survivor \
absorbs the others (their dates are kept in its timeline). List in make_dead the dying \
memories that are not worth keeping and have no merge partner.
Reply with JSON: {{"merges": [{{"survivor": "n1", "absorbed": ["n2"]}}], "make_dead": ["n3"]}}
Use [] where there is nothing to do."""

SPLIT_PROMPT = """\
The memory cluster "{cluster}" of {name} has grown to {count} memories. Split it into topic \
groups of at least {min_part} memories each; leave at least {min_remaining} memories in \
"{cluster}" (leave out the memories that belong there).

{lines}

Reply with JSON: {{"groups": [{{"name": "short topic title", "nodes": ["n1", "n2"]}}]}}"""

DIARY_PROMPT = """\
You are {name}. These are the scenes you lived through since your last diary entry:

{lines}

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


# ----------------------------------------------------------------------------------------------
# Helpers


def _now(ports):
    return iso(ports.clock.now())


def _labels(node_list):
    """Short labels for a prompt (`n1`, `n2`...) -> node ids; models mangle long ids."""
    return {f"n{number}": node["id"] for number, node in enumerate(node_list, 1)}


def _node_line(label, node, with_status=False):
    text = defuse(scene_to_text(node), 400)
    if with_status:
        status = "fresh" if node.get("fresh") else node.get("status", ACTIVE)
        return f"[{label}] {status} — {text}"
    return f"[{label}] {text}"


def _ask_json(ports, prompt, purpose, expect=dict):
    """One LLM call whose reply must be JSON; Deferred[dict or list]."""
    system = PATROL_SYSTEM.format(name=ports.name)
    deferred = complete_text(ports.llm, prompt, system=system, purpose=purpose)
    return deferred.addCallback(parse_json_reply, expect=expect)


def _embedder(ports, embedder):
    """The embedder, or None when it cannot be loaded (thresholds then use the settings)."""
    try:
        return nodes_model.get_node_embedder(ports, embedder)
    except Exception:
        return None


def _patrol_state(ports):
    return dict(ports.state.get(PATROL_STATE_DOC, None) or {})


def _save_graph(ports, nodes=None, clusters=None, vectors=None):
    if nodes is not None:
        ports.state.set(NODES_DOC, nodes)
    if clusters is not None:
        ports.state.set(CLUSTERS_DOC, clusters)
    if vectors is not None:
        save_vectors(ports, vectors)


# ----------------------------------------------------------------------------------------------
# ❶ scene notes -> nodes


@defer.inlineCallbacks
def repair_failed_notes(ports):
    """
    Ask the LLM to rewrite `[PARSE_FAILED]` scene notes as valid scenes (bounded per patrol).

    Returns:
        Deferred[dict]: `{note id: repaired JSON text}` for the notes it could repair.
    """
    repaired = {}
    if ports.mechanical:
        return repaired
    limit = int(setting(ports, "repair_max_per_patrol"))
    candidates = []
    for note in scene_notes(ports):
        if note.get("type", "scene") != "scene" or note.get("status") != PARSE_FAILED:
            continue
        try:  # edited since it failed: nothing to repair
            nodes_model.parse_scene_input(note.get("text"), default_date="0000-00-00")
        except SceneError as err:
            candidates.append((note, str(err)))
    for note, error in candidates[:limit]:
        prompt = REPAIR_PROMPT.format(error=error, text=defuse(note.get("text"), 4000))
        try:
            value = yield _ask_json(ports, prompt, "patrol_repair")
            nodes_model.parse_scene_input(value, default_date=(note.get("created_at") or "")[:10])
        except (LLMError, SceneError) as err:
            ports.log(f"{ports.name}: patrol could not repair scene note {note['id']}: {err}")
            continue
        repaired[note["id"]] = json.dumps(value, ensure_ascii=False)
    return repaired


@defer.inlineCallbacks
def classify_actions(ports, node_list):
    """
    Business or Private for each node, in one LLM call; Business when there is no LLM or
    its answer is unusable (the seed's mechanical default).

    Returns:
        Deferred[list[str]]: One root name per node.
    """
    names = ["Business"] * len(node_list)
    if ports.mechanical or not node_list:
        return names
    lines = "\n".join(
        f"[{number}] {defuse(node['scene']['action'], 300)}"
        for number, node in enumerate(node_list, 1)
    )
    prompt = CLASSIFY_PROMPT.format(name=ports.name, lines=lines)
    try:
        reply = yield _ask_json(ports, prompt, "patrol_classify")
    except LLMError as err:
        ports.log(f"{ports.name}: patrol classification failed, filing as Business: {err}")
        return names
    for number in range(1, len(node_list) + 1):
        answer = str(reply.get(str(number), "")).strip().lower()
        if answer == "private":
            names[number - 1] = "Private"
    return names


@defer.inlineCallbacks
def convert_scene_notes(ports, *, embedder=None, runner=None):
    """
    ❶ Parse the scene notes, turn the valid ones into fresh nodes (embedded in one batch) and
    file each in the best cluster at or above the cluster threshold, else in the root the LLM
    classifies it under. Unreadable notes stay, marked `[PARSE_FAILED]`, for repair.

    Returns:
        Deferred[dict]: Counts: converted, parse_failed, repaired, matched, classified.
    """
    repaired = yield repair_failed_notes(ports)
    default_importance = float(setting(ports, "default_importance"))
    prepared, failed = [], {}
    for note in scene_notes(ports):
        if note.get("type", "scene") != "scene":
            continue
        text = repaired.get(note["id"], note.get("text"))
        try:
            parsed = nodes_model.parse_scene_input(
                text, default_date=(note.get("created_at") or "")[:10] or None
            )
        except SceneError as err:
            failed[note["id"]] = str(err)
            continue
        node = nodes_model.new_node(note["id"], parsed, default_importance=default_importance)
        prepared.append(node)
    report = {"converted": 0, "parse_failed": len(failed), "repaired": len(repaired),
              "matched": 0, "classified": 0}
    matrix = None
    if prepared:
        texts = [nodes_model.node_embed_text(node) for node in prepared]
        matrix = yield nodes_model.embed_texts(ports, texts, embedder=embedder, runner=runner)
        cut = threshold(ports, "cluster_threshold", _embedder(ports, embedder))
        vectors = load_vectors(ports)
        targets, unmatched = [None] * len(prepared), []
        for position, vector in enumerate(matrix):
            cluster_id, score = nodes_model.best_cluster(vectors, vector)
            if cluster_id is not None and score >= cut:
                targets[position] = cluster_id
            else:
                unmatched.append(position)
        roots = yield classify_actions(ports, [prepared[position] for position in unmatched])
        root_of = dict(zip(unmatched, roots, strict=True))
    # -- every yield is done: read, change and write state
    now = _now(ports)
    notes = scene_notes(ports)
    converted = set()
    if prepared:
        nodes, clusters, vectors = load_nodes(ports), load_clusters(ports), load_vectors(ports)
        vectors["dims"] = int(matrix.shape[1])
        affected = set()
        for position, node in enumerate(prepared):
            converted.add(node["id"])
            if node["id"] in nodes:  # converted before a reload lost the note's removal
                continue
            cluster_id = targets[position]
            if cluster_id not in clusters:
                cluster_id = nodes_model.ensure_root(
                    clusters, root_of.get(position, "Business"), now
                )
                report["classified"] += 1
            else:
                report["matched"] += 1
            node.update(cluster_id=cluster_id, created_at=now)
            nodes[node["id"]] = node
            vectors["nodes"][node["id"]] = nodes_model.encode_vector(matrix[position])
            affected.add(cluster_id)
            report["converted"] += 1
        recompute_centroids(nodes, vectors, affected)
        _save_graph(ports, nodes, clusters, vectors)
        state = _patrol_state(ports)
        pending = list(state.get("diary_pending") or [])
        state["diary_pending"] = pending + [i for i in converted if i not in pending]
        ports.state.set(PATROL_STATE_DOC, state)
    kept = []
    for note in notes:
        if note["id"] in converted:
            continue
        if note["id"] in failed and note.get("status") != PARSE_FAILED:
            note.update(status=PARSE_FAILED, error=failed[note["id"]])
        kept.append(note)
    if len(kept) != len(notes) or failed:
        ports.state.set(SCENE_NOTES_DOC, kept)
    return report


# ----------------------------------------------------------------------------------------------
# ❷ ❸ ❺ decay, dying, revival


def increment_session_counts(ports):
    """❷ One more patrol cycle for every active node. Returns how many were counted."""
    nodes = load_nodes(ports)
    count = 0
    for node in nodes.values():
        if node.get("status") == ACTIVE:
            node["session_count"] = int(node.get("session_count", 0)) + 1
            count += 1
    if count:
        ports.state.set(NODES_DOC, nodes)
    return {"incremented": count}


def flag_dying_nodes(ports):
    """❸ Active, unpinned nodes whose eff_imp is at or below the threshold start dying."""
    cut = float(setting(ports, "dying_threshold"))
    decay = float(setting(ports, "decay_sessions"))
    nodes = load_nodes(ports)
    dying = [
        node for node in nodes.values()
        if node.get("status") == ACTIVE and not node.get("pinned")
        and effective_importance(node, decay) <= cut
    ]
    if not dying:
        return {"dying": 0}
    for node in dying:
        node["status"] = DYING
    vectors = load_vectors(ports)
    recompute_centroids(nodes, vectors, {node.get("cluster_id") for node in dying})
    _save_graph(ports, nodes, vectors=vectors)
    return {"dying": len(dying), "ids": [node["id"] for node in dying]}


def revive_nodes(ports):
    """
    ❺ Dead nodes whose eff_imp rose above the threshold (their reactivation count grew since
    they died) and dying nodes whose eff_imp is above it again become active.
    """
    cut = float(setting(ports, "dying_threshold"))
    decay = float(setting(ports, "decay_sessions"))
    nodes = load_nodes(ports)
    revived = []
    for node in nodes.values():
        status = node.get("status")
        if status not in (DEAD, DYING) or effective_importance(node, decay) <= cut:
            continue
        if status == DEAD and int(node.get("reactivation_count", 0)) <= int(
            node.get("died_reactivation_count", 0)
        ):
            continue
        node["status"] = ACTIVE
        node.pop("merged_into", None)
        revived.append(node)
    if not revived:
        return {"revived": 0}
    vectors = load_vectors(ports)
    recompute_centroids(nodes, vectors, {node.get("cluster_id") for node in revived})
    _save_graph(ports, nodes, vectors=vectors)
    return {"revived": len(revived), "ids": [node["id"] for node in revived]}


def _kill(node):
    node["status"] = DEAD
    node["fresh"] = False
    node["died_reactivation_count"] = int(node.get("reactivation_count", 0))


# ----------------------------------------------------------------------------------------------
# ❹ consolidation


def _absorb_timeline(survivor, absorbed):
    """Keep the absorbed node's dates in the survivor's `when` as {date, action} items."""
    when = list(survivor["scene"].get("when") or [])
    for item in absorbed.get("scene", {}).get("when") or []:
        entry = item if isinstance(item, dict) else {
            "date": str(item), "action": absorbed["scene"].get("action", "")
        }
        if entry not in when:
            when.append(entry)
    survivor["scene"] = {**survivor["scene"], "when": when}


def apply_consolidation(nodes, cluster_id, labels, reply, shown, bonus=0.05):
    """
    Apply one cluster's consolidation answer to `nodes` (in place).

    Args:
        nodes (dict): `{id: node}`.
        cluster_id (str): The cluster consolidated.
        labels (dict): Prompt label -> node id.
        reply (dict): `{"merges": [{"survivor", "absorbed"}], "make_dead": [...]}`.
        shown (list[str]): The node ids the model saw (their fresh flags are reset).
        bonus (float): Importance a survivor gains per merge (capped at 1.0).

    Returns:
        dict: `{"merged": [survivor ids], "absorbed": n, "made_dead": n}`.
    """
    def usable(node_id):
        node = nodes.get(node_id)
        return bool(node) and node.get("cluster_id") == cluster_id and node["status"] != DEAD

    used, survivors, absorbed_count, made_dead = set(), [], 0, 0
    merges = reply.get("merges") if isinstance(reply.get("merges"), list) else []
    for merge in merges:
        if not isinstance(merge, dict):
            continue
        survivor_id = labels.get(str(merge.get("survivor", "")).strip())
        absorbed = merge.get("absorbed")
        absorbed = absorbed if isinstance(absorbed, list) else [absorbed]
        if not usable(survivor_id) or survivor_id in used:
            continue
        absorbed_ids = []
        for label in absorbed:
            node_id = labels.get(str(label).strip())
            if usable(node_id) and node_id != survivor_id and node_id not in used:
                absorbed_ids.append(node_id)
                used.add(node_id)
        if not absorbed_ids:
            continue
        survivor = nodes[survivor_id]
        for node_id in absorbed_ids:
            _absorb_timeline(survivor, nodes[node_id])
            _kill(nodes[node_id])
            nodes[node_id]["merged_into"] = survivor_id
        survivor["importance"] = min(1.0, float(survivor["importance"]) + bonus)
        survivor["stale_vector"] = True  # its timeline changed: re-embed
        used.add(survivor_id)
        survivors.append(survivor_id)
        absorbed_count += len(absorbed_ids)
    make_dead = reply.get("make_dead") if isinstance(reply.get("make_dead"), list) else []
    for label in make_dead:
        node_id = labels.get(str(label).strip())
        if usable(node_id) and node_id not in used and nodes[node_id]["status"] == DYING:
            _kill(nodes[node_id])
            made_dead += 1
    for node_id in shown:
        if node_id in nodes:
            nodes[node_id]["fresh"] = False
    return {"merged": survivors, "absorbed": absorbed_count, "made_dead": made_dead}


@defer.inlineCallbacks
def refresh_stale_vectors(ports, *, embedder=None, runner=None):
    """Re-embed nodes whose text changed (merge survivors) in one batch; returns a count."""
    stale = [node for node in load_nodes(ports).values() if node.get("stale_vector")]
    if not stale:
        return 0
    matrix = yield nodes_model.embed_texts(
        ports, [nodes_model.node_embed_text(node) for node in stale],
        embedder=embedder, runner=runner,
    )
    nodes, vectors = load_nodes(ports), load_vectors(ports)
    affected, refreshed = set(), 0
    for node, vector in zip(stale, matrix, strict=True):
        current = nodes.get(node["id"])
        if current is None or nodes_model.node_embed_text(current) != (
            nodes_model.node_embed_text(node)
        ):
            continue  # changed again meanwhile: the next refresh embeds the new text
        current.pop("stale_vector", None)
        vectors["nodes"][node["id"]] = nodes_model.encode_vector(vector)
        affected.add(current.get("cluster_id"))
        refreshed += 1
    recompute_centroids(nodes, vectors, affected)
    _save_graph(ports, nodes, vectors=vectors)
    return refreshed


@defer.inlineCallbacks
def consolidate_clusters(ports, *, embedder=None, runner=None):
    """
    ❹ For each cluster with fresh or dying nodes, the LLM names merge pairs and the dying
    nodes to let go. A cluster whose call fails keeps its fresh flags and is retried next time.

    Returns:
        Deferred[dict]: Counts, or `{"skipped": ...}` in mechanical mode.
    """
    if ports.mechanical:
        return {"skipped": "mechanical mode"}
    max_clusters = int(setting(ports, "consolidation_max_clusters"))
    max_nodes = int(setting(ports, "consolidation_max_nodes"))
    nodes, clusters = load_nodes(ports), load_clusters(ports)
    targets = [
        cluster for cluster in sorted(clusters.values(), key=lambda c: c.get("created_at") or "")
        if any(n.get("fresh") or n.get("status") == DYING
               for n in cluster_members(nodes, cluster["id"], (ACTIVE, DYING)))
    ][:max_clusters]
    plans, errors = [], []
    for cluster in targets:
        members = cluster_members(nodes, cluster["id"], (ACTIVE, DYING))
        # fresh and dying nodes first: they are what this step is about
        members.sort(key=lambda n: (not (n.get("fresh") or n["status"] == DYING),
                                    n.get("created_at") or ""))
        members = members[:max_nodes]
        labels = _labels(members)
        lines = "\n".join(_node_line(label, nodes[i], True) for label, i in labels.items())
        prompt = CONSOLIDATE_PROMPT.format(cluster=cluster["name"], name=ports.name, lines=lines)
        try:
            reply = yield _ask_json(ports, prompt, "patrol_consolidate")
        except LLMError as err:
            errors.append(f"{cluster['name']}: {err}")
            continue
        plans.append((cluster["id"], labels, reply, [n["id"] for n in members]))
    nodes, vectors = load_nodes(ports), load_vectors(ports)
    bonus = float(setting(ports, "merge_importance_bonus"))
    report = {"clusters": len(plans), "merged": 0, "absorbed": 0, "made_dead": 0}
    for cluster_id, labels, reply, shown in plans:
        outcome = apply_consolidation(nodes, cluster_id, labels, reply, shown, bonus)
        report["merged"] += len(outcome["merged"])
        report["absorbed"] += outcome["absorbed"]
        report["made_dead"] += outcome["made_dead"]
    if plans:
        recompute_centroids(nodes, vectors, {plan[0] for plan in plans})
        _save_graph(ports, nodes, vectors=vectors)
    if errors:
        report["errors"] = errors
        ports.log(f"{ports.name}: patrol consolidation failed for {len(errors)} cluster(s)")
    report["reembedded"] = yield refresh_stale_vectors(ports, embedder=embedder, runner=runner)
    return report


# ----------------------------------------------------------------------------------------------
# ❻ split


def apply_split(nodes, clusters, cluster_id, labels, reply, *, min_part=2, min_remaining=2,
                now=None):
    """
    Apply one split answer (in place): each valid group becomes a sub-cluster.

    A group needs `min_part` active nodes of this cluster; a sub-cluster must keep
    `min_remaining` active nodes, a root keeps whatever is left (it is never split itself,
    only topic groups are carved out of it).

    Returns:
        list[str]: The new cluster ids.
    """
    cluster = clusters[cluster_id]
    is_root = bool(cluster.get("is_parent"))
    parent_id = cluster_id if is_root else cluster.get("parent_id")
    remaining = len(cluster_members(nodes, cluster_id, (ACTIVE,)))
    groups = reply.get("groups") if isinstance(reply.get("groups"), list) else []
    taken, created = set(), []
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("nodes"), list):
            continue
        ids = []
        for label in group["nodes"]:
            node_id = labels.get(str(label).strip())
            node = nodes.get(node_id)
            if (node and node_id not in taken and node_id not in ids
                    and node.get("cluster_id") == cluster_id and node["status"] == ACTIVE):
                ids.append(node_id)
        if len(ids) < min_part:
            continue
        if not is_root and remaining - len(ids) < min_remaining:
            continue
        new_id = nodes_model.new_sub_cluster(clusters, group.get("name"), parent_id, now)
        for node_id in ids:
            nodes[node_id]["cluster_id"] = new_id
        taken.update(ids)
        remaining -= len(ids)
        created.append(new_id)
    return created


@defer.inlineCallbacks
def split_large_clusters(ports):
    """
    ❻ Clusters with more than `split_min_active` active nodes are split by the LLM.

    Returns:
        Deferred[dict]: `{"split": n, "created": n}`, or `{"skipped": ...}` when mechanical.
    """
    if ports.mechanical:
        return {"skipped": "mechanical mode"}
    limit = int(setting(ports, "split_min_active"))
    min_part = int(setting(ports, "split_min_part"))
    min_remaining = int(setting(ports, "split_min_remaining"))
    nodes, clusters = load_nodes(ports), load_clusters(ports)
    sizes = {cid: len(cluster_members(nodes, cid, (ACTIVE,))) for cid in clusters}
    targets = sorted((cid for cid, size in sizes.items() if size > limit),
                     key=lambda cid: -sizes[cid])[: int(setting(ports, "split_max_clusters"))]
    plans, errors = [], []
    for cluster_id in targets:
        members = sorted(cluster_members(nodes, cluster_id, (ACTIVE,)),
                         key=lambda n: n.get("created_at") or "")
        labels = _labels(members)
        lines = "\n".join(_node_line(label, nodes[i]) for label, i in labels.items())
        prompt = SPLIT_PROMPT.format(
            cluster=clusters[cluster_id]["name"], name=ports.name, count=len(members),
            min_part=min_part, min_remaining=min_remaining, lines=lines,
        )
        try:
            reply = yield _ask_json(ports, prompt, "patrol_split")
        except LLMError as err:
            errors.append(f"{clusters[cluster_id]['name']}: {err}")
            continue
        plans.append((cluster_id, labels, reply))
    nodes, clusters, vectors = load_nodes(ports), load_clusters(ports), load_vectors(ports)
    created = []
    for cluster_id, labels, reply in plans:
        if cluster_id not in clusters:
            continue
        new_ids = apply_split(nodes, clusters, cluster_id, labels, reply, min_part=min_part,
                              min_remaining=min_remaining, now=_now(ports))
        if new_ids:
            recompute_centroids(nodes, vectors, [cluster_id, *new_ids])
            created += new_ids
    if created:
        _save_graph(ports, nodes, clusters, vectors)
    report = {"split": len({c for c, *_ in plans}), "created": len(created)}
    if errors:
        report["errors"] = errors
    return report


# ----------------------------------------------------------------------------------------------
# ❼ small clusters


def merge_small_clusters(ports, *, embedder=None):
    """
    ❼ Sub-clusters with at most `small_cluster_max` active nodes: empty ones are deleted; the
    others move all their nodes (dead ones too) to the most similar sibling when its
    similarity exceeds the cluster threshold, else to their root, and are deleted.

    Returns:
        dict: `{"deleted": n, "merged_into_sibling": n, "merged_into_root": n}`.
    """
    small = int(setting(ports, "small_cluster_max"))
    cut = threshold(ports, "cluster_threshold", _embedder(ports, embedder))
    nodes, clusters, vectors = load_nodes(ports), load_clusters(ports), load_vectors(ports)
    report = {"deleted": 0, "merged_into_sibling": 0, "merged_into_root": 0}
    changed = False
    order = sorted(clusters.values(), key=lambda c: (c.get("created_at") or "", c["id"]))
    for cluster in order:
        cluster_id = cluster["id"]
        if cluster.get("is_parent") or cluster_id not in clusters:
            continue
        members = cluster_members(nodes, cluster_id)
        if sum(1 for n in members if n.get("status") == ACTIVE) > small:
            continue
        if any(c.get("parent_id") == cluster_id and c["id"] != cluster_id
               for c in clusters.values()):
            continue  # it has child clusters: keep it
        changed = True
        if not members:
            del clusters[cluster_id]
            vectors["clusters"].pop(cluster_id, None)
            report["deleted"] += 1
            continue
        siblings = {
            c["id"] for c in clusters.values()
            if not c.get("is_parent") and c["id"] != cluster_id
            and c.get("parent_id") == cluster.get("parent_id")
        }
        target = None
        own = nodes_model.cluster_vector(vectors, cluster_id)
        if own is not None and siblings:
            best, score = nodes_model.best_cluster(vectors, own, siblings)
            if best is not None and score > cut:
                target = best
        if target is not None:
            report["merged_into_sibling"] += 1
        else:
            target = cluster.get("parent_id")
            if target not in clusters:
                target = nodes_model.ensure_root(clusters, "Business", _now(ports))
            report["merged_into_root"] += 1
        for node in members:
            node["cluster_id"] = target
        del clusters[cluster_id]
        vectors["clusters"].pop(cluster_id, None)
        recompute_centroids(nodes, vectors, [target])
    if changed:
        _save_graph(ports, nodes, clusters, vectors)
    return report


# ----------------------------------------------------------------------------------------------
# Diary and think notes


def _diary_lines(text):
    lines = [" ".join(line.split()) for line in str(text or "").splitlines()]
    return [line for line in lines if line]


@defer.inlineCallbacks
def write_diary_and_think(ports):
    """
    The diary entry for today (3-5 lines) and the think notes (3-7 bullets) from the scenes
    filed since the last diary. Unwritten scenes stay pending until a call succeeds.

    Returns:
        Deferred[dict]: `{"diary": bool, "think": int}` or `{"skipped": ...}`.
    """
    if ports.mechanical:
        return {"skipped": "mechanical mode"}
    pending = list(_patrol_state(ports).get("diary_pending") or [])
    nodes = load_nodes(ports)
    scenes = [nodes[i] for i in pending if i in nodes][-40:]
    if not scenes:
        if pending:
            state = _patrol_state(ports)
            state["diary_pending"] = []
            ports.state.set(PATROL_STATE_DOC, state)
        return {"skipped": "no new scenes"}
    date = nodes_model.today(ports)
    lines = "\n".join(f"- {defuse(scene_to_text(node), 400)}" for node in scenes)
    prompt = DIARY_PROMPT.format(name=ports.name, lines=lines, date=date)
    try:
        reply = yield _ask_json(ports, prompt, "patrol_diary")
    except LLMError as err:
        ports.log(f"{ports.name}: patrol diary failed, retried next patrol: {err}")
        return {"error": str(err)}
    diary = reply.get("diary")
    diary_lines = _diary_lines("\n".join(diary) if isinstance(diary, list) else diary)[:5]
    think = reply.get("think")
    if isinstance(think, str):
        think = _diary_lines(think)
    bullets = [" ".join(str(b).lstrip("-•* ").split()) for b in (think or [])]
    bullets = [b for b in bullets if b][: int(setting(ports, "think_max_bullets"))]
    if not diary_lines and not bullets:
        return {"error": "the diary reply had neither a diary nor think notes"}
    now = _now(ports)
    if diary_lines:
        diary_doc = dict(ports.state.get(DIARY_DOC, None) or {})
        diary_doc[date] = {"date": date, "text": "\n".join(diary_lines), "updated_at": now}
        ports.state.set(DIARY_DOC, diary_doc)
    if bullets:
        ports.state.set(THINK_DOC, {
            "text": "\n".join(f"- {bullet}" for bullet in bullets),
            "bullets": bullets,
            "updated_at": now,
        })
    state = _patrol_state(ports)
    written = {node["id"] for node in scenes}
    state["diary_pending"] = [i for i in state.get("diary_pending") or [] if i not in written]
    ports.state.set(PATROL_STATE_DOC, state)
    return {"diary": bool(diary_lines), "diary_lines": len(diary_lines), "think": len(bullets)}


# ----------------------------------------------------------------------------------------------
# The pipeline


@defer.inlineCallbacks
def run_patrol(ports, *, embedder=None, runner=None):
    """
    Run the whole patrol now (❶-❼, diary, think notes). A step that fails is reported and the
    next still runs; a second patrol for the same assistant while one runs is refused.

    Args:
        ports (AssistantPorts): The assistant.
        embedder (LocalEmbedder, optional): Overrides the configured embedder.
        runner (callable, optional): Runs embedding calls; the thread pool by default.

    Returns:
        Deferred[dict]: The report, step by step (see `format_patrol_report`).
    """
    if ports.key in _RUNNING:
        return {"skipped": "a patrol is already running for this assistant"}
    _RUNNING.add(ports.key)
    try:
        report = {"started_at": _now(ports), "mechanical": ports.mechanical, "steps": {}}
        if ports.mechanical:
            ports.log(MECHANICAL_LOG)
        kwargs = {"embedder": embedder, "runner": runner}
        steps = (
            ("notes", lambda: convert_scene_notes(ports, **kwargs)),
            ("session_counts", lambda: increment_session_counts(ports)),
            ("dying", lambda: flag_dying_nodes(ports)),
            ("consolidation", lambda: consolidate_clusters(ports, **kwargs)),
            ("revival", lambda: revive_nodes(ports)),
            ("split", lambda: split_large_clusters(ports)),
            ("small_clusters", lambda: merge_small_clusters(ports, embedder=embedder)),
            ("diary", lambda: write_diary_and_think(ports)),
        )
        for name, step in steps:
            try:
                report["steps"][name] = yield defer.maybeDeferred(step)
            except Exception as err:  # one failing step must not stop the others
                ports.log(f"{ports.name}: patrol step {name} failed: {err}")
                report["steps"][name] = {"error": str(err) or type(err).__name__}
        report["finished_at"] = _now(ports)
        state = _patrol_state(ports)
        state.update(last_run_at=report["finished_at"], runs=int(state.get("runs", 0)) + 1,
                     last_report=report)
        ports.state.set(PATROL_STATE_DOC, state)
        return report
    finally:
        _RUNNING.discard(ports.key)


def run_patrol_if_due(ports):
    """
    The dreaming-phase entry point: patrol once per sleep, when there is anything to patrol.

    The sleep is identified by "sleep_state" `started_at`; the patrol records the sleep it ran
    for in "patrol_state" `last_sleep`, so later dreaming ticks of the same sleep skip it.

    Returns:
        Deferred[dict]: The patrol report, or `{"skipped": reason}`.
    """
    sleep_started = (ports.state.get("sleep_state", None) or {}).get("started_at")
    if not sleep_started:
        return defer.succeed({"skipped": "not asleep"})
    if _patrol_state(ports).get("last_sleep") == sleep_started:
        return defer.succeed({"skipped": "already patrolled this sleep"})
    has_notes = any(n.get("type", "scene") == "scene" for n in scene_notes(ports))
    if not has_notes and not ports.state.get(NODES_DOC, None):
        return defer.succeed({"skipped": "nothing to patrol"})

    def _record(report):
        if not report.get("skipped"):
            state = _patrol_state(ports)
            state["last_sleep"] = sleep_started
            ports.state.set(PATROL_STATE_DOC, state)
        return report

    return run_patrol(ports).addCallback(_record)


# ----------------------------------------------------------------------------------------------
# Context blocks (seed 004, "Context Structure")


def relationships_text(ports):
    """A short line per entity profile: name and relationship (from "entity_profiles")."""
    profiles = ports.state.get(ENTITY_PROFILES_DOC, None) or {}
    if isinstance(profiles, dict):
        items = list(profiles.items())
    elif isinstance(profiles, list):
        items = [(p.get("name") if isinstance(p, dict) else p, p) for p in profiles]
    else:
        items = []
    lines = []
    for key, profile in items[: int(setting(ports, "relationships_max"))]:
        profile = profile if isinstance(profile, dict) else {}
        name = safe_name(profile.get("name") or profile.get("entity_name") or key)
        relationship = profile.get("relationship")
        if isinstance(relationship, dict):
            relationship = ", ".join(
                f"{k} {v}" for k, v in relationship.items()
                if isinstance(v, (str, int, float)) and k in
                ("type", "label", "band", "trust", "affinity", "summary", "status")
            )
        detail = defuse(relationship or profile.get("summary") or "", 200)
        lines.append(f"- {name}: {detail}" if detail else f"- {name}")
    return "\n".join(lines)


def system_memory_block(ports, situation):
    """Block 1-A: the think notes of the last patrol and the relationships (system message)."""
    parts = []
    think = ports.state.get(THINK_DOC, None) or {}
    if think.get("text"):
        parts.append("Notes you wrote for yourself after your last memory patrol:\n"
                     + defuse(think["text"], 2000))
    relationships = relationships_text(ports)
    if relationships:
        parts.append("People you know:\n" + relationships)
    return "\n\n".join(parts) or None


def snapshot_block(ports, situation):
    """Block 1-B: unread notes (todos, reminders) and the diary of the last days."""
    parts = []
    unread = [
        n for n in ports.state.get(SCENE_NOTES_DOC, None) or []
        if n.get("type", "scene") != "scene" and not n.get("read")
    ]
    if unread:
        parts.append("Unread notes:\n" + "\n".join(
            f"- [{safe_name(n.get('type'))}] {defuse(n.get('text'), 300)}" for n in unread[:10]
        ))
    days = int(setting(ports, "diary_days"))
    cutoff = (ports.clock.now() - timedelta(days=days)).strftime("%Y-%m-%d")
    diary = ports.state.get(DIARY_DOC, None) or {}
    recent = sorted((d for d in diary if d > cutoff), reverse=True)
    if recent:
        parts.append("Your diary:\n" + "\n".join(
            f"{date}:\n{defuse(diary[date].get('text'), 1000)}" for date in recent
        ))
    return "\n\n".join(parts) or None


def recent_nodes_block(ports, situation):
    """Block 2-B: the most recently activated nodes that have an action."""
    limit = int(setting(ports, "recent_nodes"))
    nodes = ports.state.get(NODES_DOC, None) or {}
    activated = [
        n for n in nodes.values()
        if n.get("last_activated") and (n.get("scene") or {}).get("action")
    ]
    activated.sort(key=lambda n: parse_iso(n["last_activated"]), reverse=True)
    if not activated:
        return None
    return "\n".join(f"- {defuse(scene_to_text(n), 400)}" for n in activated[:limit])


register_context_provider(
    "memory_think", system_memory_block, order=50, section="system", title="Your memory notes"
)
register_context_provider("memory_snapshot", snapshot_block, order=150, title="Notes and diary")
register_context_provider(
    "recent_nodes", recent_nodes_block, order=700, title="Memories on your mind"
)


# ----------------------------------------------------------------------------------------------
# Admin display


def format_patrol_report(report):
    """
    A patrol report as text for `@assistant/patrol`.

    Args:
        report (dict): What `run_patrol` or `run_patrol_if_due` returned.

    Returns:
        str: A few readable lines.
    """
    if not report:
        return "No patrol report."
    if report.get("skipped"):
        return f"Patrol skipped: {report['skipped']}."
    steps = report.get("steps") or {}
    titles = (
        ("notes", "❶ notes -> nodes"), ("session_counts", "❷ session counts"),
        ("dying", "❸ dying"), ("consolidation", "❹ consolidation"), ("revival", "❺ revival"),
        ("split", "❻ split"), ("small_clusters", "❼ small clusters"),
        ("diary", "diary/think"),
    )
    mode = "mechanical (no LLM)" if report.get("mechanical") else "with LLM"
    lines = [f"Patrol at {report.get('started_at', '?')} ({mode}):"]
    for key, title in titles:
        outcome = steps.get(key)
        if outcome is None:
            continue
        if isinstance(outcome, dict):
            text = ", ".join(
                f"{k} {v}" if not isinstance(v, list) else f"{k} {len(v)}"
                for k, v in outcome.items() if k != "ids"
            )
        else:
            text = str(outcome)
        lines.append(f"  {title}: {text or 'nothing to do'}")
    return "\n".join(lines)


def format_nodes_overview(ports):
    """
    The memory graph at a glance for admins: clusters with their node counts, pending notes,
    the last patrol.

    Returns:
        str: Readable lines.
    """
    nodes = ports.state.get(NODES_DOC, None) or {}
    clusters = ports.state.get(CLUSTERS_DOC, None) or {}
    notes = ports.state.get(SCENE_NOTES_DOC, None) or []
    scene = [n for n in notes if n.get("type", "scene") == "scene"]
    failed = sum(1 for n in scene if n.get("status") == PARSE_FAILED)
    counts = {status: 0 for status in (ACTIVE, DYING, DEAD)}
    for node in nodes.values():
        counts[node.get("status", ACTIVE)] = counts.get(node.get("status", ACTIVE), 0) + 1
    lines = [
        f"Memory nodes: {len(nodes)} ({counts[ACTIVE]} active, {counts[DYING]} dying, "
        f"{counts[DEAD]} dead), {len(clusters)} clusters.",
        f"Scene notes waiting: {len(scene) - failed} pending, {failed} {PARSE_FAILED}.",
    ]
    roots = sorted((c for c in clusters.values() if c.get("is_parent")),
                   key=lambda c: c.get("name", ""))
    for root in roots:
        lines.append(_cluster_line(root, nodes, "  "))
        subs = sorted((c for c in clusters.values()
                       if c.get("parent_id") == root["id"] and not c.get("is_parent")),
                      key=lambda c: c.get("name", ""))
        lines += [_cluster_line(sub, nodes, "    ") for sub in subs]
    last = (ports.state.get(PATROL_STATE_DOC, None) or {}).get("last_run_at")
    lines.append(f"Last patrol: {last or 'never'}.")
    return "\n".join(lines)


def _cluster_line(cluster, nodes, indent):
    members = cluster_members(nodes, cluster["id"])
    active = sum(1 for n in members if n.get("status") == ACTIVE)
    return (f"{indent}{cluster.get('name')} [{cluster['id'][:8]}]: {active} active / "
            f"{len(members)} nodes")


__all__ = [
    "MECHANICAL_LOG",
    "run_patrol",
    "run_patrol_if_due",
    "convert_scene_notes",
    "increment_session_counts",
    "flag_dying_nodes",
    "consolidate_clusters",
    "revive_nodes",
    "split_large_clusters",
    "merge_small_clusters",
    "write_diary_and_think",
    "system_memory_block",
    "snapshot_block",
    "recent_nodes_block",
    "format_patrol_report",
    "format_nodes_overview",
]
