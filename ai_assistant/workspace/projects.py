"""
Projects: pageable context slots for long-running work.

A project holds the working context of one multi-session task. One project at a time is
*active*: its summary and context go into the prompt. Swapping pages the active project out
(saving what the assistant says about its progress into its slot) and pages another one in,
like an OS swapping processes, so switching tasks never loses state.

State document `"projects"`::

    {
        "active": "build_tavern",          # key of the loaded project, or None
        "slots": {
            "build_tavern": {
                "summary": "Construct a tavern in the north district",
                "context": "Progress: foundation complete, walls 50%...",
                "status": "active",        # active | paused | completed
                "created_at": "2025-12-06T10:00:00Z",
                "last_active": "2025-12-06T14:30:00Z",
            },
        },
    }

`Projects` (the store) reads and writes the document through `ports.state`; each of its verbs
raises `ProjectError` with a message meant for the model (or an admin) when asked to do
something it cannot do; in that case nothing was changed.
"""

import re

from ai_assistant.plumbing import documents
from ai_assistant.plumbing.ports import iso

STATUSES = ("active", "paused", "completed")
KEY_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,63}$")


class ProjectError(ValueError):
    """A project operation was refused; the message says why. Nothing was changed."""


# ----------------------------------------------------------------------------------------------
# Reading and validating


def empty_projects():
    """A fresh `"projects"` document."""
    return {"active": None, "slots": {}}


def normalize_key(key):
    """
    Turn a project name into its slot key: lower case, spaces to underscores.

    Args:
        key (str): E.g. `"Build Tavern"`.

    Returns:
        str: E.g. `"build_tavern"`.

    Raises:
        ProjectError: If the key is empty or has characters other than letters, digits, `_`, `-`.
    """
    if not isinstance(key, str) or not key.strip():
        raise ProjectError("a project key is required, e.g. 'build_tavern'")
    normalized = re.sub(r"\s+", "_", key.strip().lower())
    if not KEY_PATTERN.match(normalized):
        raise ProjectError(
            f"invalid project key '{key}': use up to 64 letters, digits, '_' or '-', "
            "e.g. 'build_tavern'"
        )
    return normalized


def _clean_text(ports, text, what, setting, required=False):
    if text is None:
        text = ""
    if not isinstance(text, str):
        raise ProjectError(f"{what} must be text")
    text = text.strip()
    if required and not text:
        raise ProjectError(f"{what} must not be empty")
    limit = ports.settings.get(setting)
    if len(text) > limit:
        raise ProjectError(f"{what} is too long ({len(text)} chars; the limit is {limit})")
    return text


def _clean_summary(ports, summary):
    return _clean_text(
        ports, summary, "the summary", "workspace.projects.max_summary_chars", required=True
    )


def _clean_context(ports, context, what="the context"):
    return _clean_text(ports, context, what, "workspace.projects.max_context_chars")


def _require_slot(doc, key):
    slot = doc["slots"].get(key)
    if slot is None:
        known = ", ".join(sorted(doc["slots"])) or "none yet"
        raise ProjectError(f"no project '{key}'. Known projects: {known}")
    return slot


# ----------------------------------------------------------------------------------------------
# The store


class Projects:
    """
    The assistant's projects (`documents.PROJECTS`), read fresh from its state on every call:
    `projects.all()`, `projects.create(...)`, `projects.swap(...)`, `projects.update(...)`.

    Args:
        ports (AssistantPorts): The assistant.
    """

    def __init__(self, ports):
        self.ports = ports

    def document(self):
        """
        The `"projects"` document, repaired into the expected shape.

        Returns:
            dict: `{"active": key or None, "slots": {...}}` (a document that may be changed and
            written back with `_save`).
        """
        doc = self.ports.state.get(documents.PROJECTS, None)
        if not isinstance(doc, dict):
            return empty_projects()
        slots = doc.get("slots")
        if not isinstance(slots, dict):
            doc["slots"] = slots = {}
        if doc.get("active") not in slots:
            # an active key without a slot can only come from a damaged document
            doc["active"] = None
        return doc

    def _save(self, doc):
        """Write the `"projects"` document back."""
        self.ports.state.set(documents.PROJECTS, doc)

    def create(self, key, summary, context=""):
        """
        Create a new project slot. It becomes the active project when none is active; otherwise it
        waits, paused, until swapped in.

        Args:
            key (str): Its key (normalized with `normalize_key`).
            summary (str): One line saying what the project is.
            context (str, optional): The initial working context.

        Returns:
            dict: `{"key", "slot", "active"}`: the slot created and whether it was loaded.

        Raises:
            ProjectError: Bad key/summary/context, the key exists, or the slot limit is reached.
        """
        key = normalize_key(key)
        summary = _clean_summary(self.ports, summary)
        context = _clean_context(self.ports, context)
        doc = self.document()
        if key in doc["slots"]:
            raise ProjectError(
                f"a project '{key}' already exists; use update_project or swap_project")
        limit = self.ports.settings.get("workspace.projects.max_projects")
        if len(doc["slots"]) >= limit:
            raise ProjectError(
                f"there are already {len(doc['slots'])} projects (the limit is {limit}); "
                "complete or reuse one first"
            )
        now = iso(self.ports.clock.now())
        becomes_active = doc["active"] is None
        slot = {
            "summary": summary,
            "context": context,
            "status": "active" if becomes_active else "paused",
            "created_at": now,
            "last_active": now,
        }
        doc["slots"][key] = slot
        if becomes_active:
            doc["active"] = key
        self._save(doc)
        return {"key": key, "slot": dict(slot), "active": becomes_active}

    def all(self):
        """
        Every project, the active one first, then the most recently active.

        Returns:
            list[dict]: `{"key", "summary", "status", "created_at", "last_active", "active",
            "context_chars"}` each (the contexts themselves stay in their slots).
        """
        doc = self.document()
        rows = [
            {
                "key": key,
                "summary": slot.get("summary", ""),
                "status": slot.get("status", "paused"),
                "created_at": slot.get("created_at"),
                "last_active": slot.get("last_active"),
                "active": key == doc["active"],
                "context_chars": len(slot.get("context") or ""),
            }
            for key, slot in doc["slots"].items()
        ]
        rows.sort(key=lambda row: row["last_active"] or "", reverse=True)
        rows.sort(key=lambda row: not row["active"])
        return rows

    def swap(self, project_key, current_project_update=None):
        """
        Page the active project out and `project_key` in (the specification's context paging
        pattern).

        The active project's context is replaced by `current_project_update` when given (so the
        assistant writes down where it got to), and it is paused unless it was completed. The
        target becomes active and its stored context is returned so it can be picked up again.

        Args:
            project_key (str): The project to load.
            current_project_update (str, optional): The new context of the project being paged out.

        Returns:
            dict: `{"key", "summary", "context", "previous", "reopened", "note"}`.

        Raises:
            ProjectError: The target does not exist or is already active, or the update is bad.
                Nothing is changed in that case.
        """
        key = normalize_key(project_key)
        doc = self.document()
        target = _require_slot(doc, key)
        if doc["active"] == key:
            raise ProjectError(f"'{key}' is already the active project; use update_project")
        update = None
        if current_project_update is not None:
            update = _clean_context(self.ports, current_project_update, "current_project_update")

        now = iso(self.ports.clock.now())
        previous = doc["active"]
        note = None
        if previous is not None:
            current = doc["slots"][previous]
            if update:
                current["context"] = update
            if current.get("status") != "completed":
                current["status"] = "paused"
            current["last_active"] = now
        elif update:
            note = "no project was active, so current_project_update was not stored anywhere"

        reopened = target.get("status") == "completed"
        target["status"] = "active"
        target["last_active"] = now
        doc["active"] = key
        self._save(doc)
        return {
            "key": key,
            "summary": target.get("summary", ""),
            "context": target.get("context", ""),
            "previous": previous,
            "reopened": reopened,
            "note": note,
        }

    def update(self, context=None, status=None, summary=None):
        """
        Change the active project without swapping.

        Setting its status to "paused" or "completed" also unloads it (no project is active
        afterwards), since only an active project belongs in the prompt.

        Args:
            context (str, optional): Its new working context (replaces the old one).
            status (str, optional): "active", "paused" or "completed".
            summary (str, optional): A new one-line summary.

        Returns:
            dict: `{"key", "slot", "unloaded"}`.

        Raises:
            ProjectError: No project is active, nothing to change, or a bad value.
        """
        if context is None and status is None and summary is None:
            raise ProjectError("nothing to update: give context, status and/or summary")
        if status is not None and status not in STATUSES:
            raise ProjectError(f"invalid status '{status}': use one of {', '.join(STATUSES)}")
        if context is not None:
            context = _clean_context(self.ports, context)
        if summary is not None:
            summary = _clean_summary(self.ports, summary)
        doc = self.document()
        key = doc["active"]
        if key is None:
            raise ProjectError("no project is active: create_project or swap_project first")
        slot = doc["slots"][key]
        if context is not None:
            slot["context"] = context
        if summary is not None:
            slot["summary"] = summary
        unloaded = False
        if status is not None:
            slot["status"] = status
            if status != "active":
                doc["active"] = None
                unloaded = True
        slot["last_active"] = iso(self.ports.clock.now())
        self._save(doc)
        return {"key": key, "slot": dict(slot), "unloaded": unloaded}


# ----------------------------------------------------------------------------------------------
# Presentation


def format_projects(doc, context_chars=200):
    """
    The admin's view of the project slots (`@assistant/projects <npc>`).

    Args:
        doc (dict): A `"projects"` document.
        context_chars (int): How much of each context to show.

    Returns:
        str: One block per project, the active one marked with `*`.
    """
    slots = (doc or {}).get("slots") or {}
    if not slots:
        return "No projects."
    active = (doc or {}).get("active")
    order = sorted(slots, key=lambda key: slots[key].get("last_active") or "", reverse=True)
    order.sort(key=lambda key: key != active)
    lines = [f"Projects ({len(slots)}), active: {active or 'none'}"]
    for key in order:
        slot = slots[key]
        marker = "*" if key == active else " "
        lines.append(
            f"{marker} {key} [{slot.get('status', '?')}] - {slot.get('summary', '')}"
            f" (created {slot.get('created_at') or '?'}, last active "
            f"{slot.get('last_active') or '?'})"
        )
        context = " ".join((slot.get("context") or "").split())
        if context:
            if len(context) > context_chars:
                context = context[: context_chars - 3] + "..."
            lines.append(f"    {context}")
    return "\n".join(lines)
