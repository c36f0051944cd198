"""
The corrections staff make from the inspector, by name, checked by one serializer.

The REST API (`POST /api/assistants/<id>/corrections/`, JSON) and the pages' forms (CSRF
protected) both hand a request's data to `apply_correction`, which validates it with
`CorrectionSerializer` and calls the store's own function in `ai_assistant.memory.corrections`
on the reactor thread (`web.reactor.on_reactor`). Each correction lands in the audit trail and
the assistant's journal, and the changed documents are flushed to the database at once.
"""

from rest_framework import serializers

from ai_assistant.memory import correction_undo, corrections
from ai_assistant.memory.corrections import CorrectionError
from ai_assistant.web.reactor import on_reactor

# action: (what it needs, a label for the page)
ACTIONS = {
    "pin_node": (("node_id",), "pin a memory node"),
    "unpin_node": (("node_id",), "unpin a memory node"),
    "edit_journal": (("entry_id", "text"), "edit a journal entry"),
    "delete_journal": (("entry_id",), "delete a journal entry"),
    "edit_memory": (("memory_id", "text"), "edit a long-term memory"),
    "delete_memory": (("memory_id",), "delete a long-term memory"),
    "correct_attribute": (("entity_id", "attribute"), "correct an entity attribute"),
    "mark_wrong": ((), "mark a journal entry or long-term memory as wrong"),
    "undo": (("change_id",), "undo a correction"),
}


class CorrectionSerializer(serializers.Serializer):
    """One correction: an `action` and the fields it needs."""

    action = serializers.ChoiceField(choices=sorted(ACTIONS))
    node_id = serializers.CharField(required=False, max_length=100)
    entry_id = serializers.IntegerField(required=False, min_value=1)
    memory_id = serializers.CharField(required=False, max_length=100)
    entity_id = serializers.CharField(required=False, max_length=100)
    attribute = serializers.CharField(required=False, max_length=100)
    value = serializers.CharField(required=False, allow_blank=True, max_length=1000)
    text = serializers.CharField(required=False, allow_blank=True, max_length=20000)
    reason = serializers.CharField(required=False, allow_blank=True, max_length=1000)
    change_id = serializers.IntegerField(required=False, min_value=1)

    def validate(self, data):
        needed, _ = ACTIONS[data["action"]]
        missing = [name for name in needed if data.get(name) in (None, "")]
        if data["action"] == "mark_wrong" and bool(data.get("entry_id")) == bool(
                data.get("memory_id")):
            raise serializers.ValidationError(
                "mark_wrong needs entry_id or memory_id (one of them, not both).")
        if missing:
            raise serializers.ValidationError(
                f"{data['action']} needs {', '.join(missing)}.")
        return data


def _run(npc, data, by):
    """The correction itself (reactor thread): the record, or a Deferred of it."""
    ports = npc.assistant.ports()
    action = data["action"]
    if action in ("pin_node", "unpin_node"):
        return corrections.set_node_pinned(ports, data["node_id"], action == "pin_node", by=by)
    if action == "edit_journal":
        return corrections.edit_journal_entry(ports, data["entry_id"], data["text"], by=by)
    if action == "delete_journal":
        return corrections.delete_journal_entry(ports, data["entry_id"], by=by)
    if action == "edit_memory":
        return corrections.edit_memory(ports, data["memory_id"], data["text"], by=by)
    if action == "delete_memory":
        return corrections.delete_memory(ports, data["memory_id"], by=by)
    if action == "undo":
        return correction_undo.undo_correction(ports, data["change_id"], by=by)
    if action == "correct_attribute":
        return corrections.correct_entity_attribute(
            ports, data["entity_id"], data["attribute"], data.get("value", ""), by=by)
    if data.get("entry_id"):
        return corrections.mark_journal_entry_wrong(ports, data["entry_id"],
                                                    data.get("reason", ""), by=by)
    return corrections.mark_memory_wrong(ports, data["memory_id"], data.get("reason", ""),
                                         by=by)


def _run_and_flush(npc, data, by):
    def flushed(record):
        npc.assistant.flush()  # a correction reaches the database at once, not at the tick
        return record

    result = _run(npc, data, by)
    if hasattr(result, "addCallback"):
        return result.addCallback(flushed)
    return flushed(result)


def apply_correction(npc, payload, user):
    """
    Validate and make one correction as `user`.

    Args:
        npc (AssistantMixin): The assistant.
        payload (Mapping): The request's data (`action` and its fields).
        user (AccountDB): The staff member (named in the audit trail).

    Returns:
        tuple: `(record, None)` on success, `(None, errors)` otherwise, where `errors` is a
        dict of messages (the serializer's, or `{"detail": why}` for a refused correction).
    """
    serializer = CorrectionSerializer(data=payload)
    if not serializer.is_valid():
        return None, serializer.errors
    try:
        record = on_reactor(_run_and_flush, npc, dict(serializer.validated_data),
                            user.username)
    except CorrectionError as err:
        return None, {"detail": str(err)}
    return record, None
