"""
The memory inspector at scale, in a real browser: with 5,000 journal entries and 5,000
long-term memories the page is under 300 KB and asks for nothing outside the game (any such
request fails the test). How long it takes is a benchmark's figure, not this test's:
`bench.inspector_page` runs this test and reads the timings it records
(`INSPECTOR_SCALE_RECORD`), so a loaded machine cannot fail the suite.

The page is made by the inspector's own view (Django's test client, on this thread, which is
the reactor thread the inspector's reads run on), then served with its static files from a
loopback HTTP server to headless Chromium (Debian's `chromium` and `chromium-driver`, as in
`tests/test_e2e_inspector.py`). Chromium's network log (DevTools `Network.requestWillBeSent`)
lists every request the page makes, the Navigation Timing API how long it took.
"""

import http.server
import json
import os
import threading
import time
from datetime import UTC, datetime, timedelta

from django.contrib.staticfiles import finders
from django.test import override_settings
from inspector_fixtures import TEST_SETTINGS, InspectorTestCase
from test_e2e_inspector import ARTIFACTS, browser

from ai_assistant.memory.journal import get_journal
from ai_assistant.plumbing import documents

ENTRIES = MEMORIES = int(os.environ.get("INSPECTOR_SCALE_ENTRIES", "5000"))
MOST_BYTES = 300 * 1024
# where the timings go when `bench.inspector_page` runs this test
RECORD = os.environ.get("INSPECTOR_SCALE_RECORD")
NETWORK_SCHEMES = ("http", "https", "ws", "wss", "ftp")
PEOPLE = ("Alice", "Bob", "Cora", "Dmitri")


def seed_at_scale(ports):
    """5,000 journal entries over 20 days and 5,000 memories, some linked, some private."""
    start = datetime(2025, 3, 1, tzinfo=UTC)
    document = get_journal(ports)
    document["entries"] = [{
        "id": number, "content": f"Entry {number}: {PEOPLE[number % 4]} talked about the "
        f"harbour, the weather and the price of rope ({number}).",
        "timestamp": (start + timedelta(minutes=6 * number)).isoformat(),
        "importance": 1 + number % 10, "importance_method": "llm",
        "source_type": "direct", "source_trust": 0.9, "source_entity": PEOPLE[number % 4],
        "tags": ["harbour"], **({"audience": "#90"} if number % 50 == 0 else {}),
    } for number in range(1, ENTRIES + 1)]
    ports.state.set(documents.JOURNAL, document)  # at once: 5,000 adds would take minutes
    store = ports.semantic
    store.memories.clear()
    links = {}
    for number in range(1, MEMORIES + 1):
        memory_id = f"m{number}"
        store.memories[memory_id] = {
            "id": memory_id, "memory": f"{PEOPLE[number % 4]} knows fact number {number}",
            "created_at": (start + timedelta(minutes=6 * number)).isoformat(),
            "metadata": {"source_type": "direct", "source_entity": PEOPLE[number % 4],
                         "source_trust": 0.9, "entry_id": number}}
        links[memory_id] = {"linked_to": [{"id": f"m{number - 1}", "score": 0.7}]
                            if number % 3 == 0 else [], "journal_ids": [number]}
    ports.state.set(documents.MEMORY_LINKS, links)


class PageServer(http.server.ThreadingHTTPServer):
    """The rendered page at `/page`, static files at `/static/...`, on a free loopback port."""

    def __init__(self, html):
        self.html = html
        super().__init__(("127.0.0.1", 0), PageHandler)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}"


class PageHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - the standard library's name
        if self.path == "/page":
            body, kind = self.server.html, "text/html; charset=utf-8"
        else:
            found = (finders.find(self.path.removeprefix("/static/"))
                     if self.path.startswith("/static/") else None)
            if not found:
                self.send_error(404)
                return
            with open(found, "rb") as file:
                body = file.read()
            kind = "text/css" if found.endswith(".css") else "application/octet-stream"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


TIMING = (
    "const n = performance.getEntriesByType('navigation')[0];"
    "const p = performance.getEntriesByName('first-contentful-paint')[0]"
    " || performance.getEntriesByType('paint').slice(-1)[0];"
    "return {dom: n.domContentLoadedEventEnd, load: n.loadEventEnd,"
    " bytes: n.decodedBodySize, paint: p ? p.startTime : null,"
    " resources: performance.getEntriesByType('resource').map(r => r.decodedBodySize)"
    "  .reduce((a, b) => a + b, 0)};")


def load_in_chromium(html, again=3):
    """
    Open the page in headless Chromium, then `again` times more (an admin coming back):
    `(first load's timing, the median timing of the others, every URL it requested)`.
    """
    server = PageServer(html)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    driver = browser()
    try:
        driver.execute_cdp_cmd("Network.enable", {})
        driver.get_log("performance")  # start the network log from here
        driver.get(server.url + "/page")
        first = driver.execute_script(TIMING)
        later = []
        for _ in range(again):
            driver.get(server.url + "/page")
            later.append(driver.execute_script(TIMING))
        later.sort(key=lambda timing: timing["load"])
        requested = []
        for line in driver.get_log("performance"):
            message = json.loads(line["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                requested.append(message["params"]["request"]["url"])
        os.makedirs(ARTIFACTS, exist_ok=True)
        driver.save_screenshot(os.path.join(ARTIFACTS, f"scale-{ENTRIES}.png"))
        return first, later[len(later) // 2], requested, server.url
    finally:
        driver.quit()
        server.shutdown()


@override_settings(AI_ASSISTANT={**TEST_SETTINGS, "journal": {"max_entries": 10_000}})
class TestInspectorAtScale(InspectorTestCase):
    def test_5000_entries_and_5000_memories_under_300_kb_and_nothing_outside(self):
        seed_at_scale(self.ports)
        self.client.force_login(self.builder)
        started = time.perf_counter()
        response = self.client.get(f"/assistants/{self.npc.id}/")
        served = time.perf_counter() - started
        assert response.status_code == 200
        html = response.content
        assert (f"{ENTRIES} entries, newest first".encode() in html
                and f"{MEMORIES} of {MEMORIES} memories".encode() in html)
        first, timing, requested, origin = load_in_chromium(html)
        outside = [url for url in requested if url.split(":", 1)[0] in NETWORK_SCHEMES
                   and not url.startswith(origin)]  # data: URLs are no request
        assert not outside, f"the page asked outside the game for {outside}"
        print(f"\ninspector at {ENTRIES}/{MEMORIES}: page {len(html) / 1024:.1f} KB "
              f"(+ {first['resources'] / 1024:.1f} KB of CSS), server {served * 1000:.0f} ms; "
              f"first visit: first paint {first['paint'] or 0:.0f} ms, loaded "
              f"{first['load']:.0f} ms;"
              f" again (median): first paint {timing['paint'] or 0:.0f} ms, DOM ready "
              f"{timing['dom']:.0f} ms, loaded {timing['load']:.0f} ms; "
              f"{len(requested)} requests, none outside")
        # a first visit: the page and its stylesheets
        assert len(html) + first["resources"] < MOST_BYTES, (len(html), first["resources"])
        if RECORD:
            with open(RECORD, "w") as record:
                json.dump({"entries": ENTRIES, "memories": MEMORIES, "page_bytes": len(html),
                           "stylesheet_bytes": first["resources"], "served_seconds": served,
                           "first_visit": first, "again_median": timing,
                           "requests": len(requested)}, record)
