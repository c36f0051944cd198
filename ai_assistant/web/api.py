"""
The inspector's REST API, under Evennia's `/api/` (Django REST framework), staff only.

    GET  /api/assistants/                      id, key, mode, sleep phase, location of each
    GET  /api/assistants/<id>/                 status: mode, ticks, provider, LLM use, counts
    GET  /api/assistants/<id>/journal/         entries, newest first; ?q= searches: the entries
                                               that match, best first (scores), and "related"
                                               (ranked near, matching no word); paginated:
                                               ?limit=&offset=
    GET  /api/assistants/<id>/memories/        long-term memories, trust, source, links; ?q=;
                                               filters (`web.listing`), ?limit=&offset=
    GET  /api/assistants/<id>/profiles/        entity profiles and relationships; ?person=
    GET  /api/assistants/<id>/goals/           the goal tree
    GET  /api/assistants/<id>/projects/        project slots
    GET  /api/assistants/<id>/session/         session facts, patterns and tasks with their
                                               provenance; the think notes and diary, theirs
    GET  /api/assistants/<id>/nodes/           memory nodes and clusters, effective importance,
                                               audience; ?state=
    GET  /api/assistants/<id>/recall/?q=&speaker=   the recall preview: the "What you remember"
                                               and people blocks a turn would build now
    GET  /api/assistants/<id>/sleeps/          what the recent sleeps changed
    GET  /api/assistants/<id>/corrections/     the audit trail
    POST /api/assistants/<id>/corrections/     make a correction (`web.actions`)

Authentication: HTTP Basic, checked once a while (`web.auth`), or the website's session (a
session POST needs its CSRF token). Malformed JSON is a 400. Every read runs on the reactor thread (`web.reactor`).
"""

from evennia import search_tag
from twisted.internet import defer
from evennia.objects.models import ObjectDB
from rest_framework import status as http
from rest_framework.authentication import SessionAuthentication
from rest_framework.exceptions import NotFound, ParseError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.parsers import FormParser, JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from ai_assistant.handler import ASSISTANT_TAG, is_assistant
from ai_assistant.web import inspect
from ai_assistant.web.access import IsAssistantStaff
from ai_assistant.web.auth import CachedBasicAuthentication
from ai_assistant.web.listing import MemoryFilters, offset_of
from ai_assistant.web.actions import apply_correction
from ai_assistant.web.reactor import on_reactor
from ai_assistant.web.recall_preview import UnknownSpeaker, recall_preview

# The API's pages: this many rows unless `?limit=` asks for another number, at most the second.
API_PAGE, API_PAGE_MOST = 100, 1000


def all_assistants():
    """Every assistant of the game (reactor thread)."""
    found = search_tag(ASSISTANT_TAG[0], category=ASSISTANT_TAG[1])
    return sorted((obj for obj in found if is_assistant(obj)), key=lambda npc: npc.id)


def find_assistant(assistant_id):
    """The assistant with this database id, or None (reactor thread)."""
    found = ObjectDB.objects.filter(id=assistant_id).first()
    return found if found is not None and is_assistant(found) else None


def _assistant_or_404(assistant_id):
    npc = on_reactor(find_assistant, assistant_id)
    if npc is None:
        raise NotFound(f"There is no assistant #{assistant_id}.")
    return npc


class BoundedJSONParser(JSONParser):
    """JSON, with a document nested too deep for Python's parser a 400, not a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deep.") from None


class StaffAPIView(APIView):
    """Staff only; a session, or HTTP Basic checked once (`web.auth`); bounded JSON."""

    permission_classes = [IsAssistantStaff]
    authentication_classes = [CachedBasicAuthentication, SessionAuthentication]
    parser_classes = [BoundedJSONParser, FormParser, MultiPartParser]


class InspectorView(StaffAPIView):
    """Staff only; `read(npc, request)` (run on the reactor) answers a GET."""

    def read(self, npc, request):
        raise NotImplementedError

    def get(self, request, assistant_id):
        npc = _assistant_or_404(assistant_id)
        return Response(on_reactor(self.read, npc, request))


class AssistantList(StaffAPIView):

    def get(self, request):
        return Response(on_reactor(
            lambda: [inspect.assistant_summary(npc) for npc in all_assistants()]))


class AssistantStatus(InspectorView):
    def read(self, npc, request):
        return inspect.status(npc)


class Journal(InspectorView):
    """Entries newest first, or a search's results best first, in pages."""

    def get(self, request, assistant_id):
        npc = _assistant_or_404(assistant_id)
        query = request.query_params.get("q", "")
        entries = on_reactor(inspect.journal_entries, npc, query)
        paginator = LimitOffsetPagination()
        page = paginator.paginate_queryset(entries, request, view=self)
        response = paginator.get_paginated_response(page)
        response.data["query"] = query or None
        # what the search ranked near the matches without matching the query itself
        response.data["related"] = (on_reactor(inspect.journal_entries, npc, query, related=True)
                                    if query else [])
        return response


def _paged(request, rows):
    """`{"count", "offset", "limit", "results"}`: one page of `rows` (?limit= ?offset=)."""
    limit = min(max(1, offset_of(request.query_params, "limit") or API_PAGE), API_PAGE_MOST)
    offset = offset_of(request.query_params)
    return {"count": len(rows), "offset": offset, "limit": limit,
            "results": rows[offset:offset + limit]}


class Memories(InspectorView):
    """
    Long-term memories, newest first (a search's best first), with true counts: `total` in
    the store, `count` matching the filters (`web.listing.MemoryFilters`), one page of them.
    """

    @defer.inlineCallbacks
    def read(self, npc, request):
        params = request.query_params
        limit = min(max(1, offset_of(params, "limit") or API_PAGE), API_PAGE_MOST)
        offset = offset_of(params)
        found = yield inspect.long_term_memories(
            npc, params.get("q", ""), MemoryFilters.from_params(params), offset, limit)
        yield inspect.with_histories(npc, found["memories"])
        return {**found, "offset": offset, "limit": limit}


class Profiles(InspectorView):
    """People, most recently seen first; `?person=` (name or id) narrows them; paged."""

    def read(self, npc, request):
        wanted = request.query_params.get("person", "").strip().lower()
        rows = [row for row in inspect.profiles(npc) if not wanted or wanted in str(
            row.get("name") or "").lower() or wanted == str(row.get("entity_id")).lower()]
        paged = _paged(request, rows)
        return {"bands": inspect.relationship_bands(npc), "count": paged["count"],
                "offset": paged["offset"], "limit": paged["limit"],
                "profiles": paged["results"]}


class Goals(InspectorView):
    def read(self, npc, request):
        return inspect.goal_tree(npc)


class Projects(InspectorView):
    def read(self, npc, request):
        return inspect.projects(npc)


class SessionMemory(InspectorView):
    def read(self, npc, request):
        return inspect.session_memory(npc)


class Nodes(InspectorView):
    """Memory nodes (with `audience` and `private`); `?state=` narrows them; paged."""

    def read(self, npc, request):
        found = inspect.memory_nodes(npc)
        state = request.query_params.get("state", "").strip()
        rows = [row for row in found["nodes"] if not state or row["state"] == state]
        paged = _paged(request, rows)
        return {**found, "count": paged["count"], "offset": paged["offset"],
                "limit": paged["limit"], "nodes": paged["results"]}


class Sleeps(InspectorView):
    def read(self, npc, request):
        return inspect.sleeps(npc)


class RecallPreview(InspectorView):
    """What a turn would recall if `?speaker=` (name or id) said `?q=` now (`recall_preview`)."""

    def get(self, request, assistant_id):
        npc = _assistant_or_404(assistant_id)
        text = request.query_params.get("q", "").strip()
        if not text:
            return Response({"q": ["What would be said: ?q=<text>."]},
                            status=http.HTTP_400_BAD_REQUEST)
        try:
            return Response(on_reactor(recall_preview, npc, text,
                                       request.query_params.get("speaker", "")))
        except UnknownSpeaker as err:
            return Response({"speaker": [str(err)]}, status=http.HTTP_400_BAD_REQUEST)


class Corrections(InspectorView):
    """GET: the audit trail, newest first. POST: make a correction."""

    def read(self, npc, request):
        return inspect.corrections(npc)

    def post(self, request, assistant_id):
        npc = _assistant_or_404(assistant_id)
        record, errors = apply_correction(npc, request.data, request.user)
        if errors:
            return Response(errors, status=http.HTTP_400_BAD_REQUEST)
        return Response(record, status=http.HTTP_201_CREATED)
