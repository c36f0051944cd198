"""
Template tags of the memory inspector.

- `{% inspector_menu_link %}`: the "Assistants" item of the site's menu, for staff only (load
  it in the game's `website/_menu.html`, as the demo game's `web/templates` does);
- `{{ moment|when }}`: an ISO timestamp as people read it ("2025-01-02 06:00 UTC").
"""

from datetime import UTC

from django import template
from django.urls import NoReverseMatch, reverse
from django.utils.html import format_html

from ai_assistant.plumbing.ports import parse_iso
from ai_assistant.web.access import is_staff

register = template.Library()


@register.simple_tag(takes_context=True)
def inspector_menu_link(context):
    """A menu item linking to the inspector, or nothing for a visitor who is not staff."""
    request = context.get("request")
    user = getattr(request, "user", None) or context.get("user")
    if not is_staff(user):
        return ""
    try:
        url = reverse("ai_assistant_inspector:list")
    except NoReverseMatch:  # a game that did not mount the inspector's pages
        return ""
    return format_html('<li><a class="nav-link" href="{}" id="menu-assistants">Assistants</a>'
                       "</li>", url)


@register.filter
def when(value):
    """An ISO timestamp as `YYYY-MM-DD HH:MM UTC`; anything else as it is ("-" for none)."""
    if value in (None, ""):
        return "-"
    moment = parse_iso(value) if isinstance(value, str) else value
    if moment is None or not hasattr(moment, "strftime"):
        return value
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
