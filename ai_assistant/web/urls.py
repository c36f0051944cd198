"""
The inspector's routes. In the game's `web/urls.py`, before Evennia's own patterns:

    from ai_assistant.web.urls import api_urlpatterns, page_urlpatterns

    urlpatterns = [
        path("api/assistants/", include(api_urlpatterns)),   # with REST_API_ENABLED
        path("assistants/", include(page_urlpatterns)),
        ...
    ]
"""

from django.urls import path

from ai_assistant.web import api, views

api_urlpatterns = ([
    path("", api.AssistantList.as_view(), name="list"),
    path("<int:assistant_id>/", api.AssistantStatus.as_view(), name="status"),
    path("<int:assistant_id>/journal/", api.Journal.as_view(), name="journal"),
    path("<int:assistant_id>/memories/", api.Memories.as_view(), name="memories"),
    path("<int:assistant_id>/profiles/", api.Profiles.as_view(), name="profiles"),
    path("<int:assistant_id>/goals/", api.Goals.as_view(), name="goals"),
    path("<int:assistant_id>/projects/", api.Projects.as_view(), name="projects"),
    path("<int:assistant_id>/session/", api.SessionMemory.as_view(), name="session"),
    path("<int:assistant_id>/nodes/", api.Nodes.as_view(), name="nodes"),
    path("<int:assistant_id>/sleeps/", api.Sleeps.as_view(), name="sleeps"),
    path("<int:assistant_id>/recall/", api.RecallPreview.as_view(), name="recall"),
    path("<int:assistant_id>/corrections/", api.Corrections.as_view(), name="corrections"),
], "ai_assistant_api")

page_urlpatterns = ([
    path("", views.assistant_list, name="list"),
    path("<int:assistant_id>/", views.assistant_detail, name="detail"),
    path("<int:assistant_id>/correct/", views.correct, name="correct"),
], "ai_assistant_inspector")
