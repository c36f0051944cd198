"""
End-to-end: the memory inspector in a real browser. The demo game starts with its website on a
free port; staff log in through the website's login form in headless Chromium (Debian's
`chromium` and `chromium-driver`, driven by Selenium), open the inspector, search the journal,
pin a memory node, correct a journal entry from its row and undo it; a player is refused. No
page may ask for anything outside the game (Chromium's network log is checked). Screenshots of
each page are saved under `tests/artifacts/inspector/` (ignored by git; `.ci/run` keeps them as
the run's artifacts).

Skipped, with the reason, where Chromium or its driver is not installed (`.ci/run` installs
both when it runs as root).
"""

import json
import os
import shutil
import time
import urllib.request

import pytest
from game_server import TelnetClient, running_game

pytestmark = pytest.mark.e2e

ARTIFACTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "artifacts", "inspector")
PLAYER, PLAYER_PASSWORD = "Pat", "pat-password-1"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)


def browser():
    """Headless Chromium through Selenium, or a skip that says what is missing."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed "
                                    "(pip install -e '.[test]')")
    if not CHROMIUM or not CHROMEDRIVER:
        pytest.skip("Chromium or chromedriver is not installed: as root, `apt-get install -y "
                    "chromium chromium-driver` (.ci/run does it)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1280,1000"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})  # the network log
    service = webdriver.ChromeService(executable_path=CHROMEDRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    return driver


def wait_for_website(url, timeout=60):
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url + "/auth/login/", timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.time() > deadline:
            raise TimeoutError(f"the website did not answer at {url}")
        time.sleep(0.5)


@pytest.fixture(scope="module")
def game():
    with running_game(website=True) as server:
        wait_for_website(server.web_url)
        yield server


def journal_text(client):
    head = client.command("@assistant/journal Ada", r"Journal of Ada[^\n]*\n")
    return head + client.drain(0.5)


def seed_over_telnet(server):
    """A journal entry (Ada hears it), a memory node (a scene note, patrolled) and a player."""
    client = TelnetClient(server.telnet_port)
    client.read_until(r"connect", timeout=60)
    client.send(f"create {PLAYER} {PLAYER_PASSWORD}")
    client.read_until(r"Is this what you intended", timeout=60)
    client.send("Y")
    client.read_until(r"A new account|created", timeout=60)
    client.close()
    client = TelnetClient(server.telnet_port)
    client.read_until(r"connect", timeout=60)
    client.send(f"connect {server.username} {server.password}")
    client.read_until(r"Limbo", timeout=60)
    client.drain(0.5)
    try:
        client.command("talk Ada = The harbour master lives by the east pier.",
                       r"You say to Ada[^\n]*\n")
        client.command('@assistant/tool Ada = note_scene {"action": "watched the tide come in '
                       'at the east pier", "actors": ["Ada"], "importance": 0.6}',
                       r"\"success\": true")
        report = client.command("@assistant/patrol Ada", r"scene notes -> nodes[^\n]*\n",
                                timeout=120)
        assert "converted 1" in report, report
        # the journal entry is written on Ada's next awake tick (every 5 s)
        deadline = time.time() + 30
        while "harbour master" not in journal_text(client):
            assert time.time() < deadline, "Ada never journaled what she heard"
            time.sleep(1)
    finally:
        client.close()


def screenshot(driver, name):
    """The whole page as `tests/artifacts/inspector/<name>.png`."""
    os.makedirs(ARTIFACTS, exist_ok=True)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(int(height) + 40, 800), 8000))
    path = os.path.join(ARTIFACTS, f"{name}.png")
    assert driver.save_screenshot(path), path
    driver.set_window_size(1280, 1000)
    return path


NETWORK_SCHEMES = ("http", "https", "ws", "wss", "ftp")


def requests_outside(driver, server):
    """The requests the browser made since the last call that left the game's own website."""
    outside = []
    for line in driver.get_log("performance"):
        message = json.loads(line["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            url = message["params"]["request"]["url"]
            if url.split(":", 1)[0] in NETWORK_SCHEMES and not url.startswith(server.web_url):
                outside.append(url)
    return outside


def log_in(driver, server, username, password, then="/assistants/"):
    from selenium.webdriver.common.by import By

    driver.get(f"{server.web_url}/auth/login/?next={then}")
    driver.find_element(By.ID, "id_username").send_keys(username)
    password_field = driver.find_element(By.ID, "id_password")
    password_field.send_keys(password)
    password_field.submit()


def test_staff_search_and_pin_in_a_browser_and_a_player_is_refused(game):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser()
    try:
        seed_over_telnet(game)
        log_in(driver, game, game.username, game.password)
        wait = WebDriverWait(driver, 60)
        wait.until(ready.presence_of_element_located((By.ID, "assistant-list")))
        requests_outside(driver, game)  # Evennia's own login page uses CDNs: not ours to fix
        assert driver.find_element(By.ID, "menu-assistants")  # staff see it in the menu
        screenshot(driver, "1-assistants")
        driver.find_element(By.CSS_SELECTOR, "#assistant-list a[href^='/assistants/']").click()

        wait.until(ready.presence_of_element_located((By.ID, "inspector")))
        assert driver.find_element(By.ID, "status-mode").text == "awake"
        assert driver.find_elements(By.CSS_SELECTOR, "#journal svg a.ai-day rect")
        screenshot(driver, "2-assistant")

        search = driver.find_element(By.ID, "search-input")
        search.send_keys("where does the harbour master live")
        driver.find_element(By.ID, "search-button").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "journal-count"), "matching"))
        first = driver.find_element(By.CSS_SELECTOR, "#journal-entries tr.ai-entry")
        assert "harbour master lives by the east pier" in first.text
        score = float(first.find_element(By.CSS_SELECTOR, ".ai-score").text)
        assert score > 0
        screenshot(driver, "3-search")

        row = driver.find_element(By.CSS_SELECTOR, "#node-list tr.ai-node")
        node_id = row.get_attribute("data-node")
        assert "pinned" not in row.find_element(By.CSS_SELECTOR, ".ai-node-state").text
        row.find_element(By.CSS_SELECTOR, "button.ai-pin-button").click()
        wait.until(ready.text_to_be_present_in_element(
            (By.CSS_SELECTOR, ".alert, #inspector"), "Corrected: pinned memory node"))
        row = driver.find_element(By.CSS_SELECTOR, f'#node-list tr[data-node="{node_id}"]')
        assert "pinned" in row.find_element(By.CSS_SELECTOR, ".ai-node-state").text
        assert row.find_element(By.CSS_SELECTOR, "button.ai-pin-button").text == "Unpin"
        audit = driver.find_element(By.ID, "audit-trail").text
        assert f"pinned memory node {node_id}" in audit and game.username in audit
        assert "pinned: False" in audit and "pinned: True" in audit  # before and after
        screenshot(driver, "4-pinned")

        # a journal entry corrected from its row: back at the row, the outcome beside it,
        # then undone from the trail
        row = driver.find_element(By.CSS_SELECTOR, "#journal-entries tr.ai-entry")
        entry_id = row.get_attribute("data-entry")
        row.find_element(By.TAG_NAME, "summary").click()
        text = row.find_element(By.CSS_SELECTOR, "textarea[name=text]")
        text.clear()
        text.send_keys("The harbour master lives by the west pier.")
        text.find_element(By.XPATH, "./following-sibling::button").click()
        wait.until(ready.presence_of_element_located((By.ID, "flash")))
        assert driver.current_url.endswith(f"#entry-{entry_id}")
        row = driver.find_element(By.ID, f"entry-{entry_id}")
        assert "Corrected: rewrote journal entry" in row.find_element(By.ID, "flash").text
        assert "west pier" in row.text
        screenshot(driver, "5-corrected")
        driver.find_element(By.CSS_SELECTOR, "#audit-trail button.ai-undo").click()
        wait.until(ready.text_to_be_present_in_element((By.ID, "flash"), "undid"))
        assert "west pier" not in driver.find_element(By.ID, f"entry-{entry_id}").text
        assert "undone by" in driver.find_element(By.ID, "audit-trail").text
        assert not requests_outside(driver, game), "a page asked outside the game"

        driver.set_window_size(390, 900)  # a phone: the page fits, its tables scroll inside
        driver.get(f"{game.web_url}/assistants/")
        width = driver.execute_script("return document.documentElement.scrollWidth")
        assert width <= 390, width
        driver.set_window_size(1280, 1000)

        driver.delete_all_cookies()
        log_in(driver, game, PLAYER, PLAYER_PASSWORD)
        wait.until(lambda d: "/auth/login" not in d.current_url)
        refused = driver.find_element(By.ID, "refused").text
        assert "for staff (Builder or higher)" in refused and "Traceback" not in refused
        assert not driver.find_elements(By.ID, "assistant-list")
        assert not driver.find_elements(By.ID, "menu-assistants")
        screenshot(driver, "6-player-refused")
    finally:
        driver.quit()
