"""
mem0's history database: the text of every version of a memory, as the port reports it, and
what must go when an assistant's memories are deleted (the store's owner reads it through
`mem0_store.Mem0Store.histories`; the inspector shows it beside the audit trail).
"""


def change(row):
    """One line of mem0's history database as the port reports it."""
    added = row.get("event") == "ADD"
    return {"event": row.get("event"), "before": row.get("old_memory"),
            "after": row.get("new_memory"),
            # an ADD happened when the memory was made; a change when it was updated
            "time": row.get("created_at") if added else (row.get("updated_at")
                                                         or row.get("created_at"))}


def purge(memory, memory_ids, key):
    """
    Remove the history lines of deleted memories and the scope's saved messages from mem0's
    SQLite history database (mem0 keeps both after a delete; its API offers no way out but a
    reset of every assistant's store).
    """
    db = getattr(memory, "db", None)
    connection = getattr(db, "connection", None)
    if connection is None:
        return
    with db._lock:  # mem0's own lock on its connection
        connection.execute("PRAGMA secure_delete = ON")  # the texts are zeroed on disk too
        if memory_ids:
            marks = ",".join("?" * len(memory_ids))
            connection.execute(f"DELETE FROM history WHERE memory_id IN ({marks})",
                               list(memory_ids))
        try:
            connection.execute("DELETE FROM messages WHERE session_scope = ?",
                               (f"user_id={key}",))
        except Exception:  # noqa: BLE001 - an older mem0 without a messages table
            pass
        connection.commit()
