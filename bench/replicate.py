"""
A big world from a few grown assistants: `bench.scale --grow K` replicates them to N.

Growing an assistant through the simulation costs about 0.8 s of wall time per assistant-day
on this machine, so 1,000 assistants x 30 days would take days. `bench.scale --grow K` grows K
assistants through every simulated day as before, then makes the other N - K as copies of
them, each with its own words, so that the big world's reload, recall and resident memory can
be measured on all N:

- each replica is a new assistant made through the real create path (`create_object` with
  the typeclass: its script, ticker and defaults as any new assistant gets them);
- every Attribute of its template (the character's and its script's) is copied to it with its
  text varied (`Variation`): the assistant's and its regulars' names, the regulars' ids, the
  bench's topic words permuted, and every id the assistant made (its memory scope, memories,
  nodes, clusters) replaced by a new one derived from the replica's number; then the
  assistant re-reads its state (`handler.renew`) and its nodes' vectors are re-embedded from
  their varied text;
- its long-term memories are its template's with the same variation, re-embedded in batches
  with the store's embedder (so no two scopes hold the same vectors) and written into the
  replica's scope of the configured store: on the postgres store straight into the table,
  replicas' rows interleaved by their template's order the way a growing world interleaves
  them in the heap; on the embedded store into the replica's own collection.

What replicas share with their templates: the days lived (the same timestamps and counts),
the strangers met (a shared pool, as in the simulation), and the shape of every document.
mem0's history database (past versions of a memory, read by nothing the bench measures) is
not copied.
"""

import hashlib
import json
import random
import re
import uuid
from types import SimpleNamespace

# the replicas' ids are derived from this namespace and their scope, so a rerun makes the same
NAMESPACE = uuid.UUID("6f1c1e64-3b0e-4c57-9d59-3c0f2a6d1b11")
DASHED_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")
HEX_ID = re.compile(r"(?<![0-9A-Za-z+/])[0-9a-f]{32}(?![0-9A-Za-z+/=])")
# rows written to the postgres store per statement, and replicas whose rows are interleaved
WRITE_BATCH = 2_000
INTERLEAVED_REPLICAS = 50


class Variation:
    """
    The deterministic rewrite of one template's text into one replica's.

    Args:
        template_key (str): The template's key (`Ada3`).
        replica_key (str): The replica's key (`Ada417`).
        template_number (int): The template's number in the world (its regulars' numbers).
        replica_number (int): The replica's number.
        words (iterable): The simulation's topic words; the replica gets a permutation of them.
        speaker_base (int): The first regular's dbref number (`#<base + number * 10 + i>`).
    """

    def __init__(self, template_key, replica_key, template_number, replica_number, words,
                 speaker_base):
        words = list(words)
        shuffled = words[:]
        random.Random(replica_number).shuffle(shuffled)
        self.words = dict(zip(words, shuffled, strict=True))
        self.salt = f"replica-{replica_number}"
        self.names = {template_key: replica_key,
                      f"Regular{template_number}x": f"Regular{replica_number}x"}
        self.dbrefs = {f"#{speaker_base + template_number * 10 + i}":
                       f"#{speaker_base + replica_number * 10 + i}" for i in range(10)}
        # one pass over the text; `Ada3` but not `Ada30`, `Regular3x` then the regular's digit
        self._pattern = re.compile("|".join((
            rf"(?P<dashed>{DASHED_ID.pattern})", rf"(?P<hex>{HEX_ID.pattern})",
            rf"(?P<name>\b(?:{re.escape(template_key)}(?!\d)|Regular{template_number}x))",
            r"(?P<dbref>(?:" + "|".join(map(re.escape, self.dbrefs)) + r")\b)",
            r"(?P<word>\b(?:" + "|".join(map(re.escape, words)) + r")\b)")))

    def new_id(self, old, dashed):
        """The replica's id for one of its template's (the same old id gives the same new)."""
        made = uuid.uuid5(NAMESPACE, f"{self.salt}:{old}")
        return str(made) if dashed else made.hex

    def _replace(self, match):
        found, kind = match.group(0), match.lastgroup
        if kind in ("dashed", "hex"):
            return self.new_id(found, kind == "dashed")
        if kind == "name":
            return self.names[found]
        if kind == "dbref":
            return self.dbrefs[found]
        return self.words[found]

    def text(self, value):
        """One string rewritten: ids, names, speakers' dbrefs, topic words."""
        return self._pattern.sub(self._replace, value)

    def data(self, value):
        """A document rewritten throughout (dict keys included); other values unchanged."""
        if isinstance(value, Frozen):
            if value.encoded is not None:
                return json.loads(self.text(value.encoded))
            value = value.value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.data(key): self.data(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.data(item) for item in value]
        if isinstance(value, tuple):
            return tuple(self.data(item) for item in value)
        return value


class Frozen:
    """
    A template's document read once for all its replicas: as JSON text when it survives the
    round trip (then each replica's rewrite is one pass over one string; a word right after
    an escaped character, a newline, keeps its template's spelling), else as it is.
    """

    def __init__(self, value):
        self.value, self.encoded = value, None
        try:
            encoded = json.dumps(value)
        except (TypeError, ValueError):
            return
        if json.loads(encoded) == value:
            self.encoded = encoded


def template_attributes(template):
    """Every Attribute of a template, read once: `[(on the script?, key, category, Frozen)]`."""
    from evennia.utils.dbserialize import deserialize

    return [(owner is not template, attribute.key, attribute.category,
             Frozen(deserialize(attribute.value)))
            for owner in (template, template.assistant.script)
            for attribute in owner.attributes.all()]


def copy_attributes(attributes, replica, variation):
    """
    Copy a template's Attributes (`template_attributes`) to `replica` (character and
    script), varied.

    Args:
        attributes (list): The template's, as `template_attributes` reads them.
        replica (AssistantCharacter): The new assistant.
        variation (Variation): The rewrite.
    """
    replica.assistant.flush()  # nothing of its creation left to write over the copies
    for on_script, key, category, value in attributes:
        target = replica.assistant.script if on_script else replica
        target.attributes.add(key, variation.data(value), category=category)
    # as after a server restart: its runtime is made afresh from what was copied (the one of
    # its creation holds a semantic store opened on the scope it was created with)
    from ai_assistant.plumbing import residency

    if replica.ndb.ai_runtime is not None:
        residency.RESIDENCY.forget(replica.ndb.ai_runtime)
    replica.ndb.ai_runtime = None
    replica.assistant.renew()  # the state documents' caches re-read what was written
    replica.assistant.script.unsubscribe()  # the bench drives its ticks


def revector_nodes(replica, embedder):
    """Re-embed the replica's memory nodes from their varied text (the graph's own format)."""
    from ai_assistant.memory import node_vectors
    from ai_assistant.memory.nodes import node_embed_text

    graph = replica.assistant.nodes
    vectors, nodes = graph.vectors(), graph.nodes()
    ids = [node_id for node_id in vectors["nodes"] if node_id in nodes]
    if not ids:
        return
    embedded = embedder.embed([node_embed_text(nodes[node_id]) for node_id in ids])
    for node_id, vector in zip(ids, embedded, strict=True):
        encoded = node_vectors.encode_vector(vector)
        if vectors["nodes"][node_id].startswith(node_vectors.COMPACT_PREFIX):
            encoded = node_vectors.compact_vector(encoded)
        vectors["nodes"][node_id] = encoded
    graph.save_graph(vectors=vectors)


def varied_memories(rows, variation, scope, embedder):
    """
    A template's memories rewritten for a replica and re-embedded in one batch.

    Args:
        rows (SimpleNamespace): The template's memories: `ids`, and `payloads` (`Frozen`).
        variation (Variation): The rewrite.
        scope (str): The replica's memory scope (its `user_id`).
        embedder (LocalEmbedder): The store's embedder.

    Returns:
        list: `(id, vector, payload)` points.
    """
    payloads = []
    for payload in variation.data(rows.payloads):
        payload["user_id"] = scope
        # mem0's hash is of the text: the replica's text is another one
        payload["hash"] = hashlib.md5(payload.get("data", "").encode("utf-8")).hexdigest()
        payloads.append(payload)
    vectors = embedder.embed([payload.get("data", "") for payload in payloads])
    return [(variation.new_id(memory_id, True), vector.tolist(), payload)
            for memory_id, vector, payload in zip(rows.ids, vectors, payloads, strict=True)]


def write_rows(url, points):
    """
    Insert `(id, vector, payload)` rows into the postgres store's table (one transaction),
    with their terms and times, as the store gives the rows it writes
    (`pgvector_recall.write_memories`): a replica's memories are as its template's were.
    """
    import psycopg

    from ai_assistant.memory.longterm.pgvector_recall import write_memories

    scopes = {str(payload.get("user_id")) for _, _, payload in points}
    with psycopg.connect(url) as connection:
        write_memories(connection, points, scopes, batch=WRITE_BATCH)


def interleaved(points_by_replica, order_key):
    """The replicas' points in their templates' order, replicas taking turns (a heap's layout
    when they all grew together), rather than one replica's rows after another's."""
    ranked = []
    for replica, points in enumerate(points_by_replica):
        for point in points:
            ranked.append((order_key(point[2]), replica, point))
    ranked.sort(key=lambda item: (item[0], item[1]))
    return [point for _, _, point in ranked]


class MemoryCopier:
    """
    Reads the templates' memories once and writes each replica's into its scope.

    Args:
        store (str): `embedded` or `postgres`.
        url (str, optional): The postgres store's connection string.
        data_dir (str): The semantic tier's data folder (the embedded store's).
        settings (Settings): An assistant's settings (to join the game's embedded store).
    """

    def __init__(self, store, url, data_dir, settings):
        from ai_assistant.memory.embedder import get_embedder
        from ai_assistant.memory.longterm import store_move

        self.store, self.embedder = store, get_embedder()
        self.pending = []
        self._close = None
        if store == "postgres":
            self.url = url
            self.source = store_move.PostgresVectors(url)
        else:
            from ai_assistant.memory.longterm import mem0_store

            joined = mem0_store.make_semantic_store(settings, data_dir, "bench_replicator")
            shared = joined._shared  # the game's one local client, as `store_move` joins it
            self.source = store_move.EmbeddedVectors(
                shared.memory.vector_store.client, mem0_store.COLLECTION,
                self.embedder.dims, lock=shared.lock)
            self._close = joined.close
        self.rows = {}
        for batch in self.source.batches():
            for memory_id, _, payload in batch:
                self.rows.setdefault(payload.get("user_id"), []).append((memory_id, payload))
        for scope, rows in self.rows.items():
            rows.sort(key=lambda row: (str(row[1].get("created_at")), row[0]))
            self.rows[scope] = SimpleNamespace(ids=[row[0] for row in rows],
                                               payloads=Frozen([row[1] for row in rows]))

    def copy(self, template_scope, replica_scope, variation):
        """Queue (postgres) or write (embedded) one replica's memories; returns how many."""
        if template_scope not in self.rows:
            return 0
        points = varied_memories(self.rows[template_scope], variation, replica_scope,
                                 self.embedder)
        if self.store == "postgres":
            self.pending.append(points)
            if len(self.pending) >= INTERLEAVED_REPLICAS:
                self.flush()
        elif points:
            self.source.write(replica_scope, points)
        return len(points)

    def flush(self):
        """Write the queued replicas' rows, interleaved."""
        if self.pending:
            write_rows(self.url, interleaved(self.pending,
                                             lambda payload: str(payload.get("created_at"))))
            self.pending = []

    def settle(self):
        """
        After a round of replicas: the postgres table's statistics brought up to date, as a
        move between stores leaves them (`store_move`), so the round that follows measures
        recall, not plans made for the table before the bulk write.
        """
        self.flush()
        if self.store == "postgres":
            from ai_assistant.memory.longterm.pgvector_store import analyze

            analyze(self.url)

    def close(self):
        self.flush()
        if self._close is not None:
            self._close()


def replicate(world, count, copier, words, speaker_base, log=print):
    """
    Add replicas to `world` until it holds `count` assistants (templates: the grown ones).

    Args:
        world (bench.scale.World): The world; its first `world.grown` assistants are templates.
        count (int): Assistants wanted in all.
        copier (MemoryCopier): Writes the long-term memories.
        words (iterable): The simulation's topic words.
        speaker_base (int): The regulars' first dbref number.
        log (callable): Progress.

    Returns:
        dict: `{"replicas": made now, "memories": copied now}`.
    """
    from django.db import transaction
    from evennia.utils import create

    from ai_assistant.adapters import memory_scope
    from ai_assistant.plumbing.ports import FixedClock
    from ai_assistant.typeclasses import AssistantCharacter

    made, memories = 0, 0
    templates = {}  # each template's Attributes, read once
    while len(world.npcs) < count:
        number = len(world.npcs)
        template_number = number % world.grown
        template = world.npcs[template_number]
        key = f"Ada{number}"
        # one transaction per replica: each Attribute written on its own was a commit of its
        # own, and the game database's commits (a file sync each) were most of a replica's time
        with transaction.atomic():
            replica = create.create_object(AssistantCharacter, key=key, location=world.room,
                                           home=world.room)
            replica.assistant.script.unsubscribe()
            variation = Variation(template.key, key, template_number, number, words,
                                  speaker_base)
            if template_number not in templates:
                templates[template_number] = template_attributes(template)
            copy_attributes(templates[template_number], replica, variation)
            template_scope, scope = memory_scope(template), memory_scope(replica)
            if scope != variation.text(template_scope):
                raise RuntimeError(f"{key}: its scope was not rewritten ({scope})")
            clock = FixedClock(world.clocks[template_number].current)
            replica.assistant.ports().clock = clock
            revector_nodes(replica, copier.embedder)
            replica.assistant.flush()
        memories += copier.copy(template_scope, scope, variation)
        world.npcs.append(replica)
        world.clocks.append(clock)
        world.regulars.append([world.speaker(variation.text(speaker.key),
                                             int(variation.text(speaker.dbref)[1:]))
                               for speaker in world.regulars[template_number]])
        made += 1
        if made % 100 == 0:
            log(f"replicated {made} assistants ({memories} memories)")
    copier.flush()
    return {"replicas": made, "memories": memories}


def describe(grown, count, days):
    """The JSON's account of how the world was made."""
    return {
        "grown": grown, "replicated": count - grown, "days": days,
        "how": ("the first `grown` assistants lived every simulated day; the others are copies "
                "of them (replica n of grown n mod `grown`) made by bench/replicate.py: a new "
                "assistant through the typeclass's create path, its template's Attributes "
                "copied with names, speakers, topic words and ids varied, its nodes' and its "
                "long-term memories' vectors re-embedded from the varied text, the memories "
                "written into its own scope (postgres: rows interleaved by template order)"),
    }


def check_replica(world, number, copier):
    """
    How one replica compares with its template (for the JSON and the smoke test): the same
    Attributes and as many memories, none of them with its template's text or vector, and
    its memory links pointing at its own memories.
    """
    from ai_assistant.adapters import memory_scope

    replica = world.npcs[number]
    template = world.npcs[number % world.grown]

    def attribute_keys(npc):
        return sorted(attribute.key for owner in (npc, npc.assistant.script)
                      for attribute in owner.attributes.all())

    scopes = memory_scope(template), memory_scope(replica)
    ids = [set(copier.source.ids(scope)) for scope in scopes]
    vectors = [copier.source.vectors(scope, sorted(found)[:50])
               for scope, found in zip(scopes, ids, strict=True)]
    same_vectors = sum(1 for a in vectors[0].values() for b in vectors[1].values()
                       if max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-6)
    from ai_assistant.tools.registry import execute_tool
    from bench.inline import fired

    def recalled(npc):  # the assistant's own recall, through the tool staff use
        result = fired(execute_tool("search_facts", npc.assistant.ports(),
                                    {"query": "What did you hear about the harbour?"}))
        return int(result.get("count") or 0)

    links = replica.assistant.script.attributes.get("memory_links") or {}
    linked = {str(key) for key in links} | {
        str(link.get("id")) for record in links.values() for link in record.get("linked_to", [])}
    return {
        "replica": replica.key, "template": template.key,
        "same_attributes": attribute_keys(template) == attribute_keys(replica),
        "memories": [len(found) for found in ids],
        "shared_memory_ids": len(ids[0] & ids[1]),
        "same_vectors_in_sample": same_vectors,
        "linked_memories": len(linked),
        "linked_memories_in_own_scope": len(linked & ids[1]),
        "recalled": [recalled(template), recalled(replica)],
    }
