"""
Reading state documents from Evennia Attributes: one object's in one query, and, at a server
start, every starting assistant's in a few queries for them all.

`AttributeState` (`adapters`) reads an object's light documents in one query the first time one
is asked for (`stored_documents`), and the documents the shell writes straight to an Attribute
(`documents.Document.straight`) through `straight_documents`. A server start asks that of every
assistant in turn - its script's `at_server_start` reads its object, its straight documents
(for its ports) and its script's light documents, and its first tick its character's - so a
reload of N assistants cost about five queries each, most of a big world's reload.
`read_at_start` does that reading for every assistant that has not started in this process, at
the first one's `at_server_start`: their objects, their light documents and their straight ones,
in a few queries for all.

What it reads is what each assistant would read on its own a moment later, and it is kept
where that would be: the light documents in each owner's `ndb` cache (only where none was read
yet), the straight ones in Evennia's own Attribute cache, which every Evennia write keeps
current. A write-ahead log is still replayed before the first read of an assistant's state
(`AttributeState._store` opens it first), and the replay writes its documents into the cache
made here as into one made on demand (`durability.replay`).
"""

import pickle
from base64 import b64decode

from evennia.utils.dbserialize import deserialize, from_pickle

from ai_assistant.plumbing import documents

# What Evennia's serializer stores in place of a database object or a session inside a value.
_PACKED_MARKERS = (b"__packed_dbobj__", b"__packed_session__")


def stored_documents(owner, names):
    """
    Documents `names` as stored on `owner`, read in one query, as plain copies; one never
    stored reads as None, as a missing Attribute does.

    Evennia's `attributes.get` costs a query per Attribute that is not yet in its cache, and
    its `attributes.all()` one per Attribute too, so a reload of many assistants, each with
    dozens of documents, would spend most of its time on queries. Reading straight from the
    table also leaves Evennia's Attribute cache empty of values that only this cache needs.

    The owner's Attributes are named by a subquery of its links, not by a join: joined,
    SQLite (without statistics) walked every Attribute of the game for each read, 7 ms a read
    in a world of a thousand assistants, growing with the world; by the links, 1.3 ms.
    """
    field = owner._meta.get_field("db_attributes")
    held = field.remote_field.through.objects.filter(
        **{field.m2m_field_name(): owner.id}).values(field.m2m_reverse_field_name())
    found = dict(_raw_values(field.related_model.objects.filter(id__in=held), names)
                 .values_list("db_key", "raw"))
    return {name: plain_document(found.get(name)) for name in names}


def _raw_values(attributes, names):
    """The Attributes `names` (no category, a plain Attribute) with their column as stored."""
    from django.db.models import TextField
    from django.db.models.functions import Cast

    # the column as stored (Cast skips the field's own unpickling), so each value is
    # unpickled once, by `plain_document`, into a copy no other cache shares
    return attributes.filter(db_key__in=names, db_category__isnull=True,
                             db_attrtype__isnull=True).order_by("id").annotate(
        raw=Cast("db_value", TextField()))


def plain_document(stored):
    """A value as Evennia's `PickledObjectField` stores it (base64 of a pickle), as plain data."""
    if stored is None:
        return None
    data = b64decode(stored)
    if any(marker in data for marker in _PACKED_MARKERS):
        return from_pickle(pickle.loads(data))
    return pickle.loads(data)


def straight_documents(owner, names):
    """
    Documents `names` that the shell writes straight to `owner`'s Attributes, as plain copies:
    from Evennia's Attribute cache when it holds them all (`read_at_start` put them there, or
    Evennia read or wrote them), else in one query (`stored_documents`). Either way what
    Evennia wrote last is what is read: its cache is updated by every write it makes.
    """
    backend = owner.attributes.backend
    cached = getattr(backend, "_cache", None) or {}
    values = {}
    for name in names:
        key = f"{name.lower()}-None"
        if key not in cached:
            return stored_documents(owner, names)
        attribute = cached[key]
        if attribute is not None and attribute.pk is None:  # deleted from elsewhere
            return stored_documents(owner, names)
        values[name] = None if attribute is None else deserialize(attribute.value)
    return values


def read_at_start(script, script_key, is_assistant):
    """
    At a starting script's `at_server_start`: read, for every assistant script with
    `script_key` that has not been through this in this process, its object and the documents
    its start and first tick read (see the module doc), in a few queries for them all.

    A script that has been through it (its `ndb.ai_start_read`) does nothing, so a server
    start reads once for all, and a script made later reads only for itself and any others
    made since.

    Args:
        script (DefaultScript): The script starting now.
        script_key (str): The key of the assistants' scripts.
        is_assistant (callable): True for an object that is an assistant.
    """
    from django.db.models import prefetch_related_objects
    from evennia.scripts.models import ScriptDB

    if script.ndb.ai_start_read:
        return
    scripts = [found for found in ScriptDB.objects.filter(db_key=script_key,
                                                         db_obj__isnull=False)
               if not found.ndb.ai_start_read]
    # each script's object in one query (Evennia's idmapper hands back those already loaded)
    prefetch_related_objects(scripts, "db_obj")
    owners = {documents.CHARACTER: [], documents.SCRIPT: []}
    for found in scripts:
        found.ndb.ai_start_read = True
        character = found.db_obj
        if character is None or not is_assistant(character):
            continue
        owners[documents.CHARACTER].append(character)
        owners[documents.SCRIPT].append(found)
    for place, listed in owners.items():
        if listed:
            _read_owners(place, listed)


def _read_owners(place, owners):
    """
    The light and straight documents of `owners` (all characters, or all scripts).

    Each query asks for the documents by name and joins their owners, with no list of owners
    in it: SQLite, without statistics, walks every Attribute for each owner listed in an
    `IN` (a second per 500 owners in a world of a thousand), where the names' index finds
    every assistant's documents at once. The rows of owners not starting are left out here.
    """
    from django.db.models import F
    from evennia.typeclasses.attributes import Attribute

    holder = "objectdb" if place == documents.CHARACTER else "scriptdb"
    in_place = Attribute.objects.filter(**{f"{holder}__isnull": False})
    by_id = {owner.id: owner for owner in owners}
    light = {owner.id: {} for owner in owners if owner.ndb.ai_state_cache is None}
    if light:
        names = documents.kept_in_state(place, heavy=False)
        for owner_id, name, raw in _raw_values(in_place, names).values_list(
                f"{holder}__id", "db_key", "raw"):
            if owner_id in light:
                light[owner_id][name] = plain_document(raw)
        for owner_id, cache in light.items():
            owner = by_id[owner_id]
            owner.ndb.ai_state_cache = {name: cache.get(name) for name in names}
            owner.ndb.ai_state_dirty = set()
    straight = [name for name, document in documents.REGISTRY.items()
                if document.straight and document.on == place]
    if not straight:
        return
    found = {owner_id: {} for owner_id in by_id}
    for attribute in in_place.filter(db_key__in=straight, db_category__isnull=True,
                                     db_attrtype__isnull=True).annotate(
            holder_id=F(f"{holder}__id")):
        if attribute.holder_id in found:
            found[attribute.holder_id][attribute.db_key] = attribute
    for owner_id, attributes in found.items():
        backend = by_id[owner_id].attributes.backend
        for name in straight:
            # a missing one is cached as missing, as Evennia caches a lookup that found none
            backend._set_cache(name, None, attributes.get(name))
