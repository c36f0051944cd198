"""
The fields of a journal entry: what a writer may give, checked and normalised before the
journal (`memory.journal`) stores it, with messages that name the bad field.
"""

from ai_assistant.memory import provenance as provenance_model
from ai_assistant.memory.importance import MAX_IMPORTANCE, MIN_IMPORTANCE

# The specification's default trust per source type.
DEFAULT_SOURCE_TRUST = provenance_model.SOURCE_TYPE_TRUST
SOURCE_TYPES = tuple(DEFAULT_SOURCE_TRUST)
MAX_TAGS = 20
MAX_TAG_CHARS = 64
MAX_ENTITY_CHARS = 200


class JournalError(ValueError):
    """A journal entry was refused; the message says why and can be shown as-is."""


def _clean_string_list(value, label):
    if value is None:
        return []
    if not isinstance(value, list | tuple):
        raise JournalError(f"{label} must be a list of strings, not {type(value).__name__}")
    cleaned = []
    for item in value:
        if not isinstance(item, str):
            raise JournalError(f"{label} must be a list of strings; got {item!r}")
        item = item.strip()
        if len(item) > MAX_TAG_CHARS:
            raise JournalError(f"each of {label} must be at most {MAX_TAG_CHARS} characters")
        if item and item not in cleaned:
            cleaned.append(item)
    if len(cleaned) > MAX_TAGS:
        raise JournalError(f"{label} can hold at most {MAX_TAGS} items")
    return cleaned


def validate_importance(importance):
    """
    Returns:
        int: `importance` as an int 1-10.

    Raises:
        JournalError: If it is not a whole number from 1 to 10.
    """
    if isinstance(importance, bool) or not isinstance(importance, int | float):
        raise JournalError(f"importance must be a whole number from 1 to 10, not {importance!r}")
    if isinstance(importance, float) and not importance.is_integer():
        raise JournalError(f"importance must be a whole number from 1 to 10, not {importance}")
    if not MIN_IMPORTANCE <= importance <= MAX_IMPORTANCE:
        raise JournalError(f"importance must be from 1 to 10, not {importance:g}")
    return int(importance)


def validate_entry_fields(
    settings, content, tags, related_projects, source_type, source_trust, source_entity, importance
):
    """
    Check and normalise the fields of a new entry.

    Returns:
        dict: The cleaned fields (`importance` None when it should be scored).

    Raises:
        JournalError: With a message naming the bad field.
    """
    if not isinstance(content, str) or not content.strip():
        raise JournalError("content is required: a non-empty text")
    content = content.strip()
    max_chars = settings.get("journal.max_content_chars")
    if len(content) > max_chars:
        raise JournalError(
            f"content is too long ({len(content)} characters; the limit is {max_chars})"
        )
    if not isinstance(source_type, str) or source_type not in DEFAULT_SOURCE_TRUST:
        raise JournalError(
            f"unknown source_type {source_type!r}; use one of: {', '.join(SOURCE_TYPES)}"
        )
    if source_trust is None:
        source_trust = DEFAULT_SOURCE_TRUST[source_type]
    elif isinstance(source_trust, bool) or not isinstance(source_trust, int | float):
        raise JournalError(f"source_trust must be a number from 0.0 to 1.0, not {source_trust!r}")
    elif not 0.0 <= source_trust <= 1.0:
        raise JournalError(f"source_trust must be from 0.0 to 1.0, not {source_trust:g}")
    if source_entity is not None:
        if not isinstance(source_entity, str):
            raise JournalError(f"source_entity must be a name, not {source_entity!r}")
        source_entity = source_entity.strip()[:MAX_ENTITY_CHARS] or None
    if importance is not None:
        importance = validate_importance(importance)
    return {
        "content": content,
        "tags": _clean_string_list(tags, "tags"),
        "related_projects": _clean_string_list(related_projects, "related_projects"),
        "source_type": source_type,
        "source_trust": float(source_trust),
        "source_entity": source_entity,
        "importance": importance,
    }
