"""
Patrol steps on clusters: consolidation, splitting large clusters, merging small ones.

- Consolidation: for each cluster holding fresh or dying nodes, the model names merge pairs
  (the survivor absorbs the others' dates into its timeline) and the dying nodes to let go;
  merge survivors are then re-embedded.
- Split: clusters with more than `split_min_active` active nodes are split by the model into
  topic sub-clusters. The specification files unmatched nodes in a root and never splits
  roots, so no sub-cluster would ever exist: here topic groups are also *carved* out of a
  root's direct nodes (the root itself stays; its parts need `split_min_part` nodes each).
- Small clusters: sub-clusters with at most `small_cluster_max` active nodes merge into their
  most similar sibling, else their root (no model needed).

A cluster whose LLM call fails is left as it was (fresh flags stay set), so the next patrol
retries it.
"""

from twisted.internet import defer

from ai_assistant.memory import node_vectors, provenance
from ai_assistant.memory import nodes as nodes_model
from ai_assistant.memory.nodes import (
    ACTIVE,
    DEAD,
    DYING,
    Nodes,
    cluster_members,
    public_members,
    recompute_centroids,
    setting,
)
from ai_assistant.plumbing.ports import LLMError
from ai_assistant.sleep.patrol.decay import kill
from ai_assistant.sleep.patrol.graph import embedder_or_none, now_iso
from ai_assistant.sleep.patrol.prompts import (
    CONSOLIDATE_PROMPT,
    SPLIT_PROMPT,
    ask_json,
    label_nodes,
    node_line,
)

# ----------------------------------------------------------------------------------------------
# Consolidation


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


def _merge_provenance(survivor, absorbed):
    """
    A merged node rests on every node it absorbed: it lists them and their inputs in
    `derived_from`, and its speaker and trust are those of the least trusted of them
    (`provenance.derive`), so a merge never launders a player's scene into the assistant's.
    """
    merged = [survivor, *absorbed]
    refs = [provenance.ref("node", node["id"]) for node in absorbed]
    for node in merged:
        refs += provenance.of(node)["derived_from"]
    derived = provenance.derive([provenance.of(node) for node in merged], refs)
    survivor["provenance"] = derived
    survivor["source_trust"] = derived["trust"]
    if derived["speaker"]:
        survivor["source_entity"] = derived["speaker"]


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
        _merge_provenance(survivor, [nodes[node_id] for node_id in absorbed_ids])
        for node_id in absorbed_ids:
            _absorb_timeline(survivor, nodes[node_id])
            kill(nodes[node_id])
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
            kill(nodes[node_id])
            made_dead += 1
    for node_id in shown:
        if node_id in nodes:
            nodes[node_id]["fresh"] = False
    return {"merged": survivors, "absorbed": absorbed_count, "made_dead": made_dead}


@defer.inlineCallbacks
def refresh_stale_vectors(ports, *, embedder=None, runner=None):
    """Re-embed nodes whose text changed (merge survivors) in one batch; returns a count."""
    stale = [node for node in Nodes(ports).nodes().values() if node.get("stale_vector")]
    if not stale:
        return 0
    matrix = yield node_vectors.embed_texts(
        ports, [nodes_model.node_embed_text(node) for node in stale],
        embedder=embedder, runner=runner,
    )
    nodes, vectors = Nodes(ports).nodes(), Nodes(ports).vectors()
    affected, refreshed = set(), 0
    for node, vector in zip(stale, matrix, strict=True):
        current = nodes.get(node["id"])
        if current is None or nodes_model.node_embed_text(current) != (
            nodes_model.node_embed_text(node)
        ):
            continue  # changed again meanwhile: the next refresh embeds the new text
        current.pop("stale_vector", None)
        vectors["nodes"][node["id"]] = node_vectors.encode_vector(vector)
        affected.add(current.get("cluster_id"))
        refreshed += 1
    recompute_centroids(nodes, vectors, affected)
    Nodes(ports).save_graph(nodes, vectors=vectors)
    return refreshed


@defer.inlineCallbacks
def consolidate_clusters(ports, *, embedder=None, runner=None):
    """
    For each cluster with fresh or dying nodes, the LLM names merge pairs and the dying
    nodes to let go. A cluster whose call fails keeps its fresh flags and is retried next time.

    Returns:
        Deferred[dict]: Counts, or `{"skipped": ...}` in mechanical mode.
    """
    if ports.mechanical:
        return {"skipped": "mechanical mode"}
    max_clusters = int(setting(ports, "consolidation_max_clusters"))
    max_nodes = int(setting(ports, "consolidation_max_nodes"))
    nodes, clusters = Nodes(ports).nodes(), Nodes(ports).clusters()
    targets = [
        cluster for cluster in sorted(clusters.values(), key=lambda c: c.get("created_at") or "")
        if any(n.get("fresh") or n.get("status") == DYING
               for n in public_members(nodes, cluster["id"], (ACTIVE, DYING)))
    ][:max_clusters]
    plans, errors = [], []
    for cluster in targets:
        members = public_members(nodes, cluster["id"], (ACTIVE, DYING))
        # fresh and dying nodes first: they are what this step is about
        members.sort(key=lambda n: (not (n.get("fresh") or n["status"] == DYING),
                                    n.get("created_at") or ""))
        members = members[:max_nodes]
        labels = label_nodes(members)
        lines = "\n".join(node_line(label, nodes[i], True) for label, i in labels.items())
        prompt = CONSOLIDATE_PROMPT.format(cluster=cluster["name"], name=ports.name, lines=lines)
        try:
            reply = yield ask_json(ports, prompt, "patrol_consolidate")
        except LLMError as err:
            errors.append(f"{cluster['name']}: {err}")
            continue
        plans.append((cluster["id"], labels, reply, [n["id"] for n in members]))
    nodes, vectors = Nodes(ports).nodes(), Nodes(ports).vectors()
    bonus = float(setting(ports, "merge_importance_bonus"))
    report = {"clusters": len(plans), "merged": 0, "absorbed": 0, "made_dead": 0}
    for cluster_id, labels, reply, shown in plans:
        outcome = apply_consolidation(nodes, cluster_id, labels, reply, shown, bonus)
        report["merged"] += len(outcome["merged"])
        report["absorbed"] += outcome["absorbed"]
        report["made_dead"] += outcome["made_dead"]
    if plans:
        recompute_centroids(nodes, vectors, {plan[0] for plan in plans})
        Nodes(ports).save_graph(nodes, vectors=vectors)
    if errors:
        report["errors"] = errors
        ports.log(f"{ports.name}: patrol consolidation failed for {len(errors)} cluster(s)")
    report["reembedded"] = yield refresh_stale_vectors(ports, embedder=embedder, runner=runner)
    return report


# ----------------------------------------------------------------------------------------------
# Split


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
    Clusters with more than `split_min_active` active nodes are split by the LLM.

    Returns:
        Deferred[dict]: `{"split": n, "created": n}`, or `{"skipped": ...}` when mechanical.
    """
    if ports.mechanical:
        return {"skipped": "mechanical mode"}
    limit = int(setting(ports, "split_min_active"))
    min_part = int(setting(ports, "split_min_part"))
    min_remaining = int(setting(ports, "split_min_remaining"))
    nodes, clusters = Nodes(ports).nodes(), Nodes(ports).clusters()
    sizes = {cid: len(cluster_members(nodes, cid, (ACTIVE,))) for cid in clusters}
    targets = sorted((cid for cid, size in sizes.items() if size > limit),
                     key=lambda cid: -sizes[cid])[: int(setting(ports, "split_max_clusters"))]
    plans, errors = [], []
    for cluster_id in targets:
        members = sorted(public_members(nodes, cluster_id, (ACTIVE,)),
                         key=lambda n: n.get("created_at") or "")
        labels = label_nodes(members)
        lines = "\n".join(node_line(label, nodes[i]) for label, i in labels.items())
        prompt = SPLIT_PROMPT.format(
            cluster=clusters[cluster_id]["name"], name=ports.name, count=len(members),
            min_part=min_part, min_remaining=min_remaining, lines=lines,
        )
        try:
            reply = yield ask_json(ports, prompt, "patrol_split")
        except LLMError as err:
            errors.append(f"{clusters[cluster_id]['name']}: {err}")
            continue
        plans.append((cluster_id, labels, reply))
    nodes, clusters, vectors = Nodes(ports).nodes(), Nodes(ports).clusters(), Nodes(ports).vectors()
    created = []
    for cluster_id, labels, reply in plans:
        if cluster_id not in clusters:
            continue
        new_ids = apply_split(nodes, clusters, cluster_id, labels, reply, min_part=min_part,
                              min_remaining=min_remaining, now=now_iso(ports))
        if new_ids:
            recompute_centroids(nodes, vectors, [cluster_id, *new_ids])
            created += new_ids
    if created:
        Nodes(ports).save_graph(nodes, clusters, vectors)
    report = {"split": len({c for c, *_ in plans}), "created": len(created)}
    if errors:
        report["errors"] = errors
    return report


# ----------------------------------------------------------------------------------------------
# Small clusters


def merge_small_clusters(ports, *, embedder=None):
    """
    Sub-clusters with at most `small_cluster_max` active nodes: empty ones are deleted; the
    others move all their nodes (dead ones too) to the most similar sibling when its
    similarity exceeds the cluster threshold, else to their root, and are deleted.

    Returns:
        dict: `{"deleted": n, "merged_into_sibling": n, "merged_into_root": n}`.
    """
    small = int(setting(ports, "small_cluster_max"))
    cut = node_vectors.threshold(ports, "cluster_threshold", embedder_or_none(ports, embedder))
    nodes, clusters, vectors = Nodes(ports).nodes(), Nodes(ports).clusters(), Nodes(ports).vectors()
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
        own = node_vectors.cluster_vector(vectors, cluster_id)
        if own is not None and siblings:
            best, score = node_vectors.best_cluster(vectors, own, siblings)
            if best is not None and score > cut:
                target = best
        if target is not None:
            report["merged_into_sibling"] += 1
        else:
            target = cluster.get("parent_id")
            if target not in clusters:
                target = nodes_model.ensure_root(clusters, "Business", now_iso(ports))
            report["merged_into_root"] += 1
        for node in members:
            node["cluster_id"] = target
        del clusters[cluster_id]
        vectors["clusters"].pop(cluster_id, None)
        recompute_centroids(nodes, vectors, [target])
    if changed:
        Nodes(ports).save_graph(nodes, clusters, vectors)
    return report
