"""
End-to-end, in headless Chromium against a real game: every correction of a journal entry made
through the inspector's page (edit, delete, mark wrong, undo) changes the long-term memory made
from it, and the next request the game sends to the (scripted) LLM shows the corrected fact and
not the old one; the recall preview on the page is the block the next real turn sends; each
memory's history shows mem0's record of it; and no page the browser loads asks for anything
outside the loopback interface (Chromium's DevTools network log; the test fails on any).

The assistant (Iris, made by the test in the shared game and removed after it) journals three
facts, sleeps (its mechanical sleep turns them into long-term memories, `entry_id` each), wakes,
and is pointed at a scripted LLM server on 127.0.0.1 (`tests/scripted_llm.py`, which records
every request). Staff are logged in with a session made over HTTP, so the browser never opens a
page but the inspector's. Screenshots go to `tests/artifacts/inspector/`.
"""

import base64
import http.cookiejar
import json
import os
import re
import time
import urllib.parse
import urllib.request

import pytest
from game_server import login
from scripted_llm import Reply, ScriptedLLMServer
from test_e2e_inspector import ARTIFACTS, browser, screenshot, wait_for_website

NPC = "Iris"
CREW = "Captain Mira said the crew of the Gull is eleven sailors."
CREW_FIXED = "Captain Mira said the crew of the Gull is twelve sailors."
LAMP = "Old Tobias said the lighthouse lamp burns whale oil."
FERRY = "Greta said the Saltmarsh ferry leaves from the blue jetty."
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
NETWORK_SCHEMES = ("http", "https", "ws", "wss", "ftp")


@pytest.fixture(scope="module")
def game(shared_game):
    wait_for_website(shared_game.web_url)
    return shared_game


def evaluate(client, expression, timeout=60):
    """Run `expression` in the game (`py`) and return what it prints between markers."""
    client.drain(0.2)
    client.send(f'py me.msg("INS" + "<" + str({expression}) + ">" + "INS")')
    return client.read_until(r"INS<([\s\S]*?)>INS", timeout=timeout).rsplit("INS<", 1)[1][:-4]


def consolidated(client):
    return int(evaluate(client, (
        f'len((__import__("evennia").search_object("{NPC}")[0].assistant.ports().state'
        '.get("journal") or {}).get("consolidated_entry_ids") or [])')))


def seed_iris(client, llm):
    """Iris with three facts in her journal and as long-term memories, awake, on the LLM."""
    client.command(f"@assistant/create {NPC}", rf"Created assistant {NPC}[^\n]*\n")
    client.command(f"@assistant/config {NPC} = ticks.sleep 1", rf"{NPC}[^\n]*\n")
    for fact in (CREW, LAMP, FERRY):
        client.command(f'@assistant/tool {NPC} = add_journal_entry {{"content": "{fact}", '
                       '"importance": 8}', r"success[^\n]*\n")
    client.command(f"@assistant/sleep {NPC}", r"now asleep[^\n]*\n")
    deadline = time.time() + 240
    while consolidated(client) < 3:
        assert time.time() < deadline, "Iris never consolidated her journal"
        time.sleep(1)
    client.command(f"@assistant/wake/force {NPC}", rf"{NPC}: [^\n]*\n", timeout=60)
    client.command(f"@assistant/config {NPC} = llm.base_url {llm.base_url}",
                   rf"{NPC}: llm.base_url[^\n]*\n")
    client.command(f"@assistant/config {NPC} = llm.api_key test-key", r"\(hidden\)")
    return int(evaluate(client, f'__import__("evennia").search_object("{NPC}")[0].id'))


def whole(request):
    return "\n".join(str(message.get("content") or "") for message in request["messages"])


def ask(client, llm, question, timeout=120):
    """
    Say `question` to Iris and wait for her answer (so her turn is over before what comes
    next: a preview must see the state the next turn sees); the first request to the LLM
    that carried the question, as one text.
    """
    since = len(llm.requests)
    client.drain(0.2)
    client.send(f"talk {NPC} = {question}")
    client.read_until(rf'{NPC} says[^\n]*Noted\.', timeout=timeout)
    client.drain(0.5)
    for request in llm.requests[since:]:
        if question in whole(request):
            return whole(request)
    raise AssertionError(f"no request to the LLM carried {question!r}")


def api(server, path):
    """GET an inspector API path with HTTP Basic auth (as a script would); the JSON."""
    token = base64.b64encode(f"{server.username}:{server.password}".encode()).decode()
    request = urllib.request.Request(server.web_url + path,
                                     headers={"Authorization": f"Basic {token}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def memories_of(server, npc_id, entry_text):
    """The long-term memories whose words hold `entry_text` (all of them, one API page)."""
    found = api(server, f"/api/assistants/{npc_id}/memories/?limit=1000")["memories"]
    return [memory for memory in found if entry_text in memory["memory"]]


def section_shot(driver, section, name):
    """One section of the page as `tests/artifacts/inspector/<name>.png` (for the docs)."""
    from selenium.webdriver.common.by import By

    path = os.path.join(ARTIFACTS, f"{name}.png")
    assert driver.find_element(By.ID, section).screenshot(path), path
    return path


def session_id(server):
    """A logged-in staff session, made through the login form over HTTP (not the browser)."""
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    url = server.web_url + "/auth/login/"
    form = opener.open(url, timeout=60).read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    data = urllib.parse.urlencode({"username": server.username, "password": server.password,
                                   "csrfmiddlewaretoken": token}).encode()
    opener.open(urllib.request.Request(url, data, headers={"Referer": url}), timeout=60)
    return next(cookie.value for cookie in jar if cookie.name == "sessionid")


class Page:
    """The inspector's page for Iris in Chromium, every request it makes checked."""

    def __init__(self, driver, server, npc_id):
        self.driver, self.server = driver, server
        self.url = f"{server.web_url}/assistants/{npc_id}/"
        self.requested = []

    def open(self, query=""):
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ready
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver.get(self.url + query)
        WebDriverWait(self.driver, 60).until(
            ready.presence_of_element_located((By.ID, "inspector")))
        self.check_requests()

    def check_requests(self):
        """Every request since the last check: on the loopback interface, or the test fails."""
        for line in self.driver.get_log("performance"):
            message = json.loads(line["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                url = message["params"]["request"]["url"]
                self.requested.append(url)
                parts = urllib.parse.urlsplit(url)
                if parts.scheme in NETWORK_SCHEMES:
                    assert parts.hostname in LOOPBACK, f"a page asked outside: {url}"

    def entry_row(self, text):
        from selenium.webdriver.common.by import By

        for row in self.driver.find_elements(By.CSS_SELECTOR, "#journal-entries tr.ai-entry"):
            if text in row.text:
                return row
        raise AssertionError(f"no journal row shows {text!r}")

    def submit(self, row, button_text, fill=None):
        """Open the row's corrections, fill a field, press a button; back at the row."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ready
        from selenium.webdriver.support.ui import WebDriverWait

        row_id = row.get_attribute("id")
        row.find_element(By.TAG_NAME, "summary").click()
        if fill:
            name, value = fill
            field = row.find_element(By.CSS_SELECTOR, f"[name={name}]")
            field.clear()
            field.send_keys(value)
        button = next(button for button in row.find_elements(By.TAG_NAME, "button")
                      if button.text == button_text)
        button.click()
        WebDriverWait(self.driver, 60).until(ready.staleness_of(button))
        WebDriverWait(self.driver, 60).until(
            ready.presence_of_element_located((By.ID, "flash")))
        self.check_requests()
        kept = self.driver.find_elements(By.ID, row_id)  # none when the entry was deleted
        return kept[0] if kept else None


def test_each_correction_through_the_page_reaches_the_memory_and_the_next_prompt(game):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    llm = ScriptedLLMServer(responder=lambda request: Reply.tool("say", {"message": "Noted."}))
    llm.start()
    client = login(game)
    driver = None
    try:
        npc_id = seed_iris(client, llm)
        assert len(memories_of(game, npc_id, CREW)) == 1
        before = ask(client, llm, "Iris, how many sailors are in the crew of the Gull?")
        assert "eleven sailors" in before  # the fact is recalled before any correction
        assert "whale oil" in ask(client, llm, "Iris, what does the lighthouse lamp burn?")

        driver = browser()
        driver.execute_cdp_cmd("Network.enable", {})
        driver.get(game.web_url + "/static/ai_assistant/inspector.css")  # the site's origin
        driver.add_cookie({"name": "sessionid", "value": session_id(game), "path": "/"})
        page = Page(driver, game, npc_id)
        page.open()

        # the recall preview is the block the next real turn sends
        question = "Iris, which jetty does the Saltmarsh ferry leave from?"
        page.open("?" + urllib.parse.urlencode({"rq": question, "rspeaker": game.username}))
        shown = driver.find_element(By.ID, "recall-block").get_attribute("textContent")
        people = driver.find_element(By.ID, "people-block").get_attribute("textContent")
        assert "blue jetty" in shown
        screenshot(driver, "7-recall-preview")
        section_shot(driver, "recall", "recall-preview")
        sent = ask(client, llm, question)
        assert shown in sent, (shown, sent)
        if not people.startswith("(no block"):
            assert people in sent, (people, sent)

        # 1. edit: the memory made from the entry is replaced by the corrected text
        page.open()
        row = page.submit(page.entry_row("eleven sailors"), "Save text", ("text", CREW_FIXED))
        assert "Corrected: rewrote journal entry" in row.find_element(By.ID, "flash").text
        (old,) = memories_of(game, npc_id, CREW)
        (new,) = memories_of(game, npc_id, CREW_FIXED)
        assert old["wrong"] and not new["wrong"]
        assert [event["event"] for event in old["history"]][:1] == ["added"]
        assert "edit_journal" in [event["event"] for event in old["history"]]
        assert any(event["by"] == "mem0" and event["event"] == "marked"
                   for event in old["history"]), (old["history"], old.get("history_error"))
        screenshot(driver, "8-edited")
        sent = ask(client, llm, "Iris, tell me again how big the crew of the Gull is?")
        assert "twelve sailors" in sent and "eleven" not in sent

        # 2. delete: the entry goes, the memory made from it is never recalled again
        page.open()
        page.submit(page.entry_row("whale oil"), "Delete")
        assert "whale oil" not in driver.find_element(By.ID, "journal-entries").text
        (lamp,) = memories_of(game, npc_id, LAMP)
        assert lamp["wrong"]
        assert "whale oil" not in ask(client, llm, "Iris, what fuel does the lighthouse use?")

        # 3. mark wrong, then 4. undo it from the trail: gone from the prompt, then back
        page.open()
        row = page.submit(page.entry_row("blue jetty"), "Mark wrong",
                          ("reason", "the ferry moved to the red jetty"))
        assert "marked wrong by" in row.text
        (ferry,) = memories_of(game, npc_id, FERRY)
        assert ferry["wrong"]
        assert "blue jetty" not in ask(client, llm, "Iris, where does the Saltmarsh ferry go from?")
        page.open("#corrections")
        trail = driver.find_element(By.ID, "audit-trail")
        newest = trail.find_element(By.CSS_SELECTOR, "tr.ai-audit")
        assert newest.get_attribute("data-action") == "mark_wrong"
        newest.find_element(By.CSS_SELECTOR, "button.ai-undo").click()
        WebDriverWait(driver, 60).until(ready.text_to_be_present_in_element((By.ID, "flash"),
                                                                             "undid"))
        page.check_requests()
        (ferry,) = memories_of(game, npc_id, FERRY)
        assert not ferry["wrong"]
        assert "blue jetty" in ask(client, llm, "Iris, from where does the Saltmarsh ferry sail?")

        page.open("?" + urllib.parse.urlencode({"memory": ferry["id"]}) + "#memories")
        history = driver.find_element(By.CSS_SELECTOR, f"#memory-{ferry['id']} details.ai-history")
        history.find_element(By.TAG_NAME, "summary").click()
        events = [item.get_attribute("data-event") for item in
                  history.find_elements(By.CSS_SELECTOR, "li.ai-history-event")]
        assert events[0] == "added" and "mark_wrong" in events and events[-1] == "undo"
        screenshot(driver, "9-memory-history")
        section_shot(driver, "memories", "memory-history")
        page.check_requests()
        assert page.requested, "the network log recorded nothing: the check checked nothing"
    finally:
        if driver is not None:
            driver.quit()
        try:
            client.command(f"@destroy/force {NPC}", r"(?i)destroyed|deleted[^\n]*\n")
        finally:
            client.close()
            llm.stop()
