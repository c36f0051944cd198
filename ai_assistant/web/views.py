"""
The inspector's pages on the game's website, staff only, in Evennia's website templates.

    /assistants/                  every assistant, with its mode and place
    /assistants/<id>/             one assistant: status, journal timeline and search, long-term
                                  memories and their links, people, goals, projects, memory
                                  nodes, what the recent sleeps changed, corrections
    /assistants/<id>/correct/     POST (CSRF) one correction, then back to the page

An anonymous visitor is sent to the login page; a logged-in player gets 403.
"""

from django.contrib import messages
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST
from twisted.internet import defer

from ai_assistant.web import charts, inspect
from ai_assistant.web.access import is_staff
from ai_assistant.web.actions import ACTIONS, apply_correction
from ai_assistant.web.api import all_assistants, find_assistant
from ai_assistant.web.reactor import on_reactor

# What the "while it slept" section names, from the counts of `sleep.reports`.
SLEEP_HIGHLIGHTS = (
    ("importance_scoring.scored", "entries scored"),
    ("consolidation.consolidated", "entries consolidated"),
    ("importance_scoring.with_facts", "entries with facts extracted"),
    ("consolidation.stored", "memories stored"),
    ("memory_links.links_created", "links made"),
    ("reflection.insights", "reflections written"),
    ("entity_consolidation.consolidated", "profiles consolidated"),
    ("episodic_pruning.pruned", "entries pruned"),
    ("patrol.notes.converted", "scene notes turned into nodes"),
    ("patrol.consolidation.merged", "nodes merged"),
    ("patrol.dying.dying", "nodes started dying"),
    ("patrol.consolidation.made_dead", "nodes died"),
    ("patrol.revival.revived", "nodes revived"),
    ("context_compaction.compacted", "conversation compactions"),
)


def staff_only(view):
    """Anonymous: to the login page. Logged in but not staff: 403."""
    def guarded(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not is_staff(request.user):
            raise PermissionDenied("The memory inspector is for staff (Builder or higher).")
        return view(request, *args, **kwargs)

    guarded.__name__ = view.__name__
    guarded.__doc__ = view.__doc__
    return guarded


@require_GET
@staff_only
def assistant_list(request):
    """Every assistant of the game."""
    rows = on_reactor(lambda: [inspect.assistant_summary(npc) for npc in all_assistants()])
    return render(request, "ai_assistant/inspector_list.html",
                  {"assistants": rows, "page_title": "Assistants"})


def _offset(request):
    try:
        return max(0, int(request.GET.get("offset", 0)))
    except ValueError:
        return 0


def _sleep_rows(reports):
    rows = []
    for report in reports:
        counts = report.get("counts") or {}
        rows.append({**report, "highlights": [(label, counts[key]) for key, label in
                                              SLEEP_HIGHLIGHTS if counts.get(key)]})
    return rows


@defer.inlineCallbacks
def _page_data(npc, query, offset, page_size):
    """Everything the page shows (reactor thread; waits for the long-term memory)."""
    status = yield inspect.status(npc)
    try:
        memories = yield inspect.long_term_memories(npc, query)
    except Exception as err:  # noqa: BLE001 - the rest of the page still shows
        memories = {"available": False, "memories": [], "error": str(err)}
    nodes = inspect.memory_nodes(npc)
    for node in nodes["nodes"]:
        node["curve"] = mark_safe(charts.decay_curve(node, nodes["decay_sessions"],
                                                     nodes["dying_threshold"]))
    bands = inspect.relationship_bands(npc)
    people = inspect.profiles(npc)
    for person in people:
        person["chart"] = mark_safe(charts.relationship_course(person["course"], bands))
    entries = inspect.journal_entries(npc, query)
    return {
        "status": status,
        "entries": entries[offset:offset + page_size],
        "entry_total": len(entries),
        "timeline": mark_safe(charts.importance_timeline(inspect.importance_points(npc))),
        "memories": memories,
        "link_graph": mark_safe(charts.link_graph(memories["memories"])),
        "people": people,
        "goals": inspect.goal_tree(npc),
        "projects": inspect.projects(npc),
        "nodes": nodes,
        "sleeps": _sleep_rows(inspect.sleeps(npc)),
        "audit": inspect.corrections(npc),
    }


@require_GET
@staff_only
def assistant_detail(request, assistant_id):
    """One assistant's memory, every tier; `?q=` searches the journal and long-term memory."""
    npc = on_reactor(find_assistant, assistant_id)
    if npc is None:
        raise Http404(f"There is no assistant #{assistant_id}.")
    query = request.GET.get("q", "").strip()
    offset = _offset(request)
    page_size = on_reactor(lambda: int(npc.assistant.ports().settings.get(
        "inspector.page_size")))
    data = on_reactor(_page_data, npc, query, offset, page_size)
    previous = max(0, offset - page_size) if offset else None
    following = offset + page_size if offset + page_size < data["entry_total"] else None
    return render(request, "ai_assistant/inspector_detail.html", {
        **data, "npc": npc, "query": query, "offset": offset, "previous": previous,
        "following": following, "actions": ACTIONS, "page_title": f"{npc.key}'s memory",
    })


@require_POST
@staff_only
def correct(request, assistant_id):
    """Make one correction from a form (CSRF checked by Django), then back to the page."""
    npc = on_reactor(find_assistant, assistant_id)
    if npc is None:
        raise Http404(f"There is no assistant #{assistant_id}.")
    record, errors = apply_correction(npc, request.POST, request.user)
    if errors:
        text = "; ".join(
            f"{field}: {' '.join(map(str, problems))}" if isinstance(problems, list)
            else str(problems) for field, problems in errors.items())
        messages.error(request, f"Not corrected: {text}")
    else:
        messages.success(request, f"Corrected: {record['detail']}")
    back = reverse("ai_assistant_inspector:detail", args=[npc.id])
    anchor = request.POST.get("back", "")
    return redirect(f"{back}#{anchor}" if anchor.isidentifier() else back)
