"""
The memory inspector: what an assistant remembers, on the game's website and REST API.

A shell package (Django and Evennia): `api` (Django REST framework views under
`/api/assistants/`), `views` and `templates/` (the staff pages at `/assistants/`), `inspect`
(the reads), `actions` (the corrections, through `ai_assistant.memory.corrections`), `charts`
(server-side SVG), `access` (staff only) and `reactor` (running on the reactor thread from a
web worker thread). Enable it in a game with `"ai_assistant.web"` in `INSTALLED_APPS` and the
routes of `ai_assistant.web.urls` (see the README's "Memory inspector").
"""
