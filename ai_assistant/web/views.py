"""
The inspector's pages on the game's website, staff only, in Evennia's website templates.

    /assistants/                  every assistant, with its mode and place
    /assistants/<id>/             one assistant: status, journal timeline and search, long-term
                                  memories and their links, people, goals, projects, memory
                                  nodes, what the recent sleeps changed, corrections
    /assistants/<id>/correct/     POST (CSRF) one correction, then back to the page

An anonymous visitor is sent to the login page; a logged-in player gets a plain 403 page.
Long lists come in pages (`?offset=` journal, `?moffset=` memories, `?noffset=` nodes,
`?poffset=` people); memories are filtered by `web.listing.MemoryFilters`, the journal by
`?day=`. A correction returns to the same address, at its row, with its outcome beside it.
"""

import hashlib
import uuid

from django.contrib.auth.views import redirect_to_login
from django.core.cache import cache
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_GET, require_POST
from twisted.internet import defer

from ai_assistant.web import charts, inspect
from ai_assistant.web.access import is_staff
from ai_assistant.web.actions import ACTIONS, apply_correction
from ai_assistant.web.api import all_assistants, find_assistant
from ai_assistant.web.listing import MemoryFilters, offset_of, page
from ai_assistant.web.reactor import on_reactor
from ai_assistant.web.recall_preview import UnknownSpeaker, recall_preview

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


# The memory filter's choice of source type (`journal` source types).
SOURCE_TYPES = ("direct", "observation", "inference", "environmental")
REFUSED = "The memory inspector is for staff (Builder or higher)."
# Where a correction's outcome waits, in the session, for the page it returns to.
FLASH_KEY = "ai_assistant_inspector_flash"
# How long a form's submission is remembered, so that a second click does nothing.
SUBMITTED_SECONDS = 3600


def staff_only(view):
    """Anonymous: to the login page. Logged in but not staff: a plain 403 page (no traceback)."""
    def guarded(request, *args, **kwargs):
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not is_staff(request.user):
            return render(request, "ai_assistant/inspector_refused.html",
                          {"page_title": "Not for players", "reason": REFUSED}, status=403)
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


def _sleep_rows(reports):
    rows = []
    for report in reports:
        counts = report.get("counts") or {}
        rows.append({**report, "highlights": [(label, counts[key]) for key, label in
                                              SLEEP_HIGHLIGHTS if counts.get(key)]})
    return rows


@defer.inlineCallbacks
def _memory_section(npc, query, filters, offset, size):
    """A page of the long-term memories narrowed by `filters` (reactor thread)."""
    try:
        memories = yield inspect.long_term_memories(npc, query, filters, offset, size)
    except Exception as err:  # noqa: BLE001 - the rest of the page still shows
        return {"available": False, "memories": [], "error": str(err)}, None
    for row in memories["memories"]:
        row["row"] = f"memory-{row['id']}"
    yield inspect.with_histories(npc, memories["memories"])
    return memories, (None if query else memories["total"])


def _node_rows(npc):
    nodes = inspect.memory_nodes(npc)
    for node in nodes["nodes"]:
        node["row"] = f"node-{node['id']}"
    return nodes


def _people_rows(npc):
    bands = inspect.relationship_bands(npc)
    people = inspect.profiles(npc)
    for person in people:
        person["row"] = "person-" + "".join(ch for ch in str(person["entity_id"]) if ch.isalnum())
    return bands, people


@defer.inlineCallbacks
def _preview(npc, params):
    """The recall preview asked for with `?rq=` (and `?rspeaker=`), or None (reactor)."""
    text = str(params.get("rq", "")).strip()
    if not text:
        return None
    try:
        return (yield recall_preview(npc, text, params.get("rspeaker", "")))
    except UnknownSpeaker as err:
        return {"error": str(err)}


@defer.inlineCallbacks
def _page_data(npc, view):
    """Everything the page shows (reactor thread; waits for the long-term memory)."""
    size = int(npc.assistant.ports().settings.get("inspector.page_size"))
    memories, count = yield _memory_section(npc, view["query"], view["filters"],
                                            offset_of(view["params"], "moffset"), size)
    status = yield inspect.status(npc, long_term=count)
    bands, people = _people_rows(npc)
    preview = yield _preview(npc, view["params"])
    hits = inspect.journal_hits(npc, view["query"], view["day"])
    journal = page(hits, offset_of(view["params"]), size)
    journal["rows"] = inspect.derived_by_entry(npc, inspect.entry_views(npc, journal["rows"]))
    return {
        "status": status,
        "preview": preview,
        "journal": journal,
        "points": inspect.importance_points(npc),
        "memories": memories,
        "people": people,
        "bands": bands,
        "goals": inspect.goal_tree(npc),
        "projects": inspect.projects(npc),
        "session": inspect.session_memory(npc),
        "nodes": _node_rows(npc),
        "sleeps": _sleep_rows(inspect.sleeps(npc)),
        "audit": [{**record, "row": f"change-{record.get('id')}"}
                  for record in inspect.corrections(npc)[:50]],
        "page_size": size,
    }


def _draw(data, view):
    """The pages of each list and their charts (web thread: no state is read here)."""
    size, params = data["page_size"], view["params"]
    memories = data["memories"]
    # the memories are already the page asked for: the page's numbers come from their count
    memory_page = {**page(range(memories.get("count", 0)), offset_of(params, "moffset"), size),
                   "rows": memories["memories"]}
    nodes = page(data["nodes"]["nodes"], offset_of(params, "noffset"), size)
    people = page(data["people"], offset_of(params, "poffset"), 12)
    for node in nodes["rows"]:
        node["curve"] = mark_safe(charts.decay_curve(node, data["nodes"]["decay_sessions"],
                                                     data["nodes"]["dying_threshold"]))
    for person in people["rows"]:
        person["chart"] = mark_safe(charts.relationship_course(person["course"], data["bands"]))
    shown = [memory_page["rows"], data["journal"]["rows"], nodes["rows"], people["rows"],
             data["audit"]]
    return {
        "memory_page": memory_page, "node_page": nodes,
        "people_page": people,
        "timeline": mark_safe(charts.importance_timeline(data["points"], view["day"])),
        "link_graph": mark_safe(charts.link_graph(memory_page["rows"])),
        "shown_rows": {row.get("row") for rows in shown for row in rows},
    }


def _keep(params, *drop):
    """The page's query string without `drop` (for links that change one part of it)."""
    kept = params.copy()
    for name in drop:
        kept.pop(name, None)
    return kept.urlencode()


@require_GET
@staff_only
def assistant_detail(request, assistant_id):
    """One assistant's memory, every tier; `?q=` searches the journal and long-term memory."""
    npc = on_reactor(find_assistant, assistant_id)
    if npc is None:
        raise Http404(f"There is no assistant #{assistant_id}.")
    view = {"query": request.GET.get("q", "").strip()[:500], "params": request.GET,
            "filters": MemoryFilters.from_params(request.GET),
            "day": MemoryFilters.from_params({"since": request.GET.get("day", "")}).since}
    data = on_reactor(_page_data, npc, view)
    drawn = _draw(data, view)
    flash = request.session.pop(FLASH_KEY, None)
    if flash:
        flash["beside_row"] = flash.get("row") in drawn["shown_rows"]
    return render(request, "ai_assistant/inspector_detail.html", {
        **data, **drawn, "npc": npc, "query": view["query"], "day": view["day"],
        "filters": view["filters"], "flash": flash, "here": request.get_full_path(),
        "form_token": uuid.uuid4().hex, "actions": ACTIONS, "source_types": SOURCE_TYPES,
        "keep_journal": _keep(request.GET, "offset"),
        "keep_memories": _keep(request.GET, "moffset"),
        "keep_nodes": _keep(request.GET, "noffset"), "keep_people": _keep(request.GET, "poffset"),
        "page_title": f"{npc.key}'s memory",
    })


def _errors_text(errors):
    return "; ".join(
        f"{field}: {' '.join(map(str, problems))}" if isinstance(problems, list | tuple)
        else str(problems) for field, problems in errors.items())


def _first_submission(request):
    """False for a second submission of the same form (a double click): done once only."""
    token = request.POST.get("form_token", "")
    if not token:
        return True
    fields = sorted((key, value) for key, value in request.POST.items()
                    if key != "csrfmiddlewaretoken")
    key = "ai_assistant.web.form:" + hashlib.sha256(repr(fields).encode()).hexdigest()
    return cache.add(key, True, SUBMITTED_SECONDS)


@require_POST
@staff_only
def correct(request, assistant_id):
    """
    Make one correction from a form (CSRF checked by Django), then back to the same place of
    the page (its search, filters and pages, at the row), with the outcome beside the row.
    """
    npc = on_reactor(find_assistant, assistant_id)
    if npc is None:
        raise Http404(f"There is no assistant #{assistant_id}.")
    row = request.POST.get("row", "")
    row = row if row.replace("-", "").replace("_", "").isalnum() else ""
    if not _first_submission(request):
        flash = {"ok": True, "text": "Already done: this form was sent twice, the correction "
                 "was made once."}
    else:
        record, errors = apply_correction(npc, request.POST, request.user)
        flash = ({"ok": False, "text": f"Not corrected: {_errors_text(errors)}"} if errors
                 else {"ok": True, "text": f"Corrected: {record['detail']}",
                       "change": record.get("id")})
    request.session[FLASH_KEY] = {**flash, "row": row}
    page_url = reverse("ai_assistant_inspector:detail", args=[npc.id])
    back = request.POST.get("next", "")
    if not (back.startswith(page_url) and url_has_allowed_host_and_scheme(back, None)):
        back = page_url
    back = back.split("#", 1)[0]
    anchor = row or request.POST.get("back", "")
    return redirect(f"{back}#{anchor}" if anchor.replace("-", "").replace("_", "").isalnum()
                    else back)
