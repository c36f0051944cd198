"""
End-to-end: the memory inspector in a real browser. The demo game starts with its website on a
free port; staff log in through the website's login form in headless Chromium (Debian's
`chromium` and `chromium-driver`, driven by Selenium), open the inspector, search the journal
and pin a memory node; a player is refused. Screenshots of each page are saved under
`tests/artifacts/inspector/` (ignored by git; `.ci/run` keeps them as the run's artifacts).

Skipped, with the reason, where Chromium or its driver is not installed (`.ci/run` installs
both when it runs as root).
"""

import os
import re
import shutil
import time
import urllib.request

import pytest
from game_server import TelnetClient

ARTIFACTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "artifacts", "inspector")
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
def game(shared_game):
    wait_for_website(shared_game.web_url)
    return shared_game


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
        screenshot(driver, "1-assistants")
        driver.find_element(By.LINK_TEXT, "Ada").click()

        wait.until(ready.presence_of_element_located((By.ID, "inspector")))
        assert driver.find_element(By.ID, "status-mode").text == "awake"
        assert driver.find_elements(By.CSS_SELECTOR, "#journal svg circle")
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
        screenshot(driver, "4-pinned")

        driver.delete_all_cookies()
        log_in(driver, game, PLAYER, PLAYER_PASSWORD)
        wait.until(lambda d: "/auth/login" not in d.current_url)
        assert "403" in driver.title or re.search(r"403|[Ff]orbidden|[Pp]ermission",
                                                  driver.page_source)
        assert not driver.find_elements(By.ID, "assistant-list")
        screenshot(driver, "5-player-refused")
    finally:
        driver.quit()
