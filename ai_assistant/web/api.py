"""
The inspector's REST API, under Evennia's `/api/` (Django REST framework), staff only.

    GET  /api/assistants/                      id, key, mode, sleep phase, location of each
    GET  /api/assistants/<id>/                 status: mode, ticks, provider, LLM use, counts
    GET  /api/assistants/<id>/journal/         entries, newest first; ?q= searches: the entries
                                               that match, best first (scores), and "related"
                                               (ranked near, matching no word); paginated:
                                               ?limit=&offset=
    GET  /api/assistants/<id>/memories/        long-term memories, trust, source, links; ?q=
    GET  /api/assistants/<id>/profiles/        entity profiles and relationships
    GET  /api/assistants/<id>/goals/           the goal tree
    GET  /api/assistants/<id>/projects/        project slots
    GET  /api/assistants/<id>/nodes/           memory nodes and clusters, effective importance
    GET  /api/assistants/<id>/sleeps/          what the recent sleeps changed
    GET  /api/assistants/<id>/corrections/     the audit trail
    POST /api/assistants/<id>/corrections/     make a correction (`web.actions`)

Authentication is Evennia's REST setting (HTTP Basic and the website's session; a session
POST needs its CSRF token). Every read runs on the reactor thread (`web.reactor`).
"""

from evennia import search_tag
from evennia.objects.models import ObjectDB
from rest_framework import status as http
from rest_framework.exceptions import NotFound
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from ai_assistant.handler import ASSISTANT_TAG, is_assistant
from ai_assistant.web import inspect
from ai_assistant.web.access import IsAssistantStaff
from ai_assistant.web.actions import apply_correction
from ai_assistant.web.reactor import on_reactor


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


class InspectorView(APIView):
    """Staff only; `read(npc, request)` (run on the reactor) answers a GET."""

    permission_classes = [IsAssistantStaff]

    def read(self, npc, request):
        raise NotImplementedError

    def get(self, request, assistant_id):
        npc = _assistant_or_404(assistant_id)
        return Response(on_reactor(self.read, npc, request))


class AssistantList(APIView):
    permission_classes = [IsAssistantStaff]

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
        response.data["related"] = (on_reactor(inspect.journal_entries, npc, query, True)
                                    if query else [])
        return response


class Memories(InspectorView):
    def read(self, npc, request):
        return inspect.long_term_memories(npc, request.query_params.get("q", ""))


class Profiles(InspectorView):
    def read(self, npc, request):
        return {"bands": inspect.relationship_bands(npc), "profiles": inspect.profiles(npc)}


class Goals(InspectorView):
    def read(self, npc, request):
        return inspect.goal_tree(npc)


class Projects(InspectorView):
    def read(self, npc, request):
        return inspect.projects(npc)


class Nodes(InspectorView):
    def read(self, npc, request):
        return inspect.memory_nodes(npc)


class Sleeps(InspectorView):
    def read(self, npc, request):
        return inspect.sleeps(npc)


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
