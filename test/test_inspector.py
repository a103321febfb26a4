"""The memory inspector in a real browser (Debian's headless Chromium driven by Playwright) against
a memory built from a simulated day of the small office (its identities named by the operator
step), served by ``embodied-memory inspect`` as a process. Screenshots of every page, at a desk
and a phone viewport, go to test/screenshots/inspector/ (README shows them)."""
from __future__ import annotations

import os
import shutil
import socket
import sqlite3
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO, VENV_BIN

pytestmark = pytest.mark.integration
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SHOTS = REPO / "test" / "screenshots" / "inspector"
DESK, PHONE = {"width": 1280, "height": 800}, {"width": 390, "height": 844}
PAGES = ("timeline", "map", "people", "identity-changes", "ask", "exploration", "health")
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]


@pytest.fixture(scope="module")
def memory(tmp_path_factory):
    """A simulated day ingested by the default pipeline, identities named from stored crops."""
    from embodied_memory.evaluation.runner import run_eval
    from embodied_memory.sim.episode import EpisodeConfig
    os.environ.setdefault("EMBODIED_MEMORY_CACHE", str(tmp_path_factory.mktemp("cache")))
    out = tmp_path_factory.mktemp("inspect")
    run_eval(out, EpisodeConfig(seed=0, days=1, people=2), planners=("rules",), variants=("psfr",), per_type=1,
             progress=False, phrasings=("dev",))
    shutil.copytree(out / "memory_psfr", out / "pristine")      # before any test writes to it
    return out / "memory_psfr"


def _fresh_copy(memory: Path, to: Path) -> Path:
    """The day's memory as built, before the tests named or forgot anyone."""
    shutil.copytree(memory.parent / "pristine", to)
    return to


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(data_dir: Path | None, *extra: str, env: dict | None = None):
    """``inspect --data-dir data_dir *extra`` (``data_dir`` None: ``inspect *extra``) on a free port."""
    port = _free_port()
    source = ["--data-dir", str(data_dir)] if data_dir is not None else []
    proc = subprocess.Popen([str(VENV_BIN / "embodied-memory"), "inspect", *source,
                             "--port", str(port), *extra], env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"inspect exited {proc.returncode}: {proc.stdout.read()}")
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
            return proc, url
        except urllib.error.HTTPError:       # served, but refused (token): it is up
            return proc, url
        except OSError:
            time.sleep(0.3)
    proc.kill()
    raise AssertionError("inspect did not serve within 60 s")


@pytest.fixture(scope="module")
def server(memory):
    proc, url = _serve(memory)
    yield url
    proc.terminate()
    proc.wait(timeout=10)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).exists():
        pytest.skip(f"needs Chromium at {CHROMIUM} (Debian package chromium; scripts/test.sh installs it)")
    from playwright.sync_api import sync_playwright
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_FLAGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport=DESK)
    p = context.new_page()
    p.errors = []
    p.on("console", lambda m: p.errors.append(m.text) if m.type == "error" else None)
    p.on("pageerror", lambda e: p.errors.append(str(e)))
    yield p
    context.close()


def _store_rows(memory: Path, sql: str, args=()) -> list:
    with sqlite3.connect(f"file:{memory / 'memory.sqlite3'}?mode=ro", uri=True) as conn:
        return conn.execute(sql, args).fetchall()


@pytest.mark.parametrize("viewport", ["desk", "phone"])
def test_every_page_loads_without_console_errors_and_fits_the_viewport(browser, server, viewport):
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport=DESK if viewport == "desk" else PHONE)
    page = context.new_page()
    errors = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    for name in PAGES:
        response = page.goto(f"{server}/{name}")
        assert response.status == 200, name
        page.wait_for_load_state("networkidle")
        assert page.locator("h1").first.is_visible(), name
        if name == "map":     # a legend (the marks, the colour ramp's times) and a scale bar in metres
            items = page.locator("ul.legend li").all_inner_texts()
            assert "keyframe pose" in items[0] and any(":" in i for i in items), items
            assert page.locator("svg.map g.scale text").text_content().endswith(" m")
        overflow = page.evaluate("document.scrollingElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{name} is {overflow} px wider than a {viewport} viewport"
        page.screenshot(path=str(SHOTS / f"{name}_{viewport}.png"), full_page=viewport == "desk" and name != "timeline")
    context.close()
    assert errors == [], errors


def test_the_timeline_lists_keyframes_and_an_observation_shows_its_pose_and_people(page, server, memory):
    page.goto(f"{server}/timeline")
    thumbs = page.locator(".thumb")
    stored = _store_rows(memory, "SELECT COUNT(*) FROM observations")[0][0]
    assert 0 < thumbs.count() <= stored
    # the thumbnails in view are decoded images (the others load lazily, when scrolled to)
    page.wait_for_function("[...document.querySelectorAll('.thumb img')].slice(0, 4)"
                           ".every(i => i.complete && i.naturalWidth > 0)", timeout=15000)
    with_person = _store_rows(memory, "SELECT o.observation_id FROM observations o JOIN sightings s ON s.obs = o.id "
                                      "LIMIT 1")[0][0]
    page.goto(f"{server}/observation/{with_person}")
    assert "Pose" in page.content() and page.locator(".box.person").count() >= 1
    page.screenshot(path=str(SHOTS / "observation_desk.png"))


def test_a_search_returns_thumbnails_with_their_recency_score(page, server):
    page.goto(f"{server}/timeline")
    page.fill("input[name=q]", "a person in the office")
    page.click("form.filters button")
    page.wait_for_load_state("networkidle")
    assert page.locator(".thumb img").count() >= 3
    assert page.locator(".thumb .score").first.inner_text().startswith("score ")
    assert not page.errors, page.errors
    page.screenshot(path=str(SHOTS / "search_desk.png"))


def test_the_ask_box_answers_with_evidence_and_a_tool_trace(page, server, memory):
    name = _store_rows(memory, "SELECT display_name FROM identities WHERE display_name != '' LIMIT 1")[0][0]
    page.goto(f"{server}/ask")
    page.fill("input[name=question]", f"Where did you last see {name}?")
    page.click("form.ask button")
    page.wait_for_selector(".answer")
    assert page.locator(".answer").get_attribute("data-status") == "ok", page.locator(".answer .text").inner_text()
    assert name in page.locator(".answer .text").inner_text()
    assert page.locator(".answer .thumb img").count() >= 1
    assert page.locator("ol.trace li code").count() >= 1
    page.screenshot(path=str(SHOTS / "ask_answer_desk.png"), full_page=True)


def test_an_identity_is_renamed_then_forgotten_through_the_page_and_the_store_shows_it(page, server, memory):
    person = _store_rows(memory, "SELECT identity_id FROM identities ORDER BY identity_id DESC LIMIT 1")[0][0]
    assert _store_rows(memory, "SELECT COUNT(*) FROM sightings WHERE identity_id = ?", (person,))[0][0] > 0
    page.goto(f"{server}/people/{person}")
    page.fill("input[name=name]", "Ursula Tester")
    page.click("text=Save name")
    page.wait_for_selector(".message")
    assert _store_rows(memory, "SELECT display_name FROM identities WHERE identity_id = ?", (person,)) == \
        [("Ursula Tester",)]
    page.click("text=Forget this person")
    assert int(page.locator("[data-count=sightings]").inner_text()) > 0
    page.fill("input[name=confirm]", "wrong id")
    page.click("button.danger")
    assert "nothing was deleted" in page.content()
    page.errors.clear()           # the refusal's 400, logged by the browser
    assert _store_rows(memory, "SELECT COUNT(*) FROM sightings WHERE identity_id = ?", (person,))[0][0] > 0
    page.go_back()
    page.fill("input[name=confirm]", person)
    page.click("button.danger")
    page.wait_for_selector("text=Nothing remains")
    assert _store_rows(memory, "SELECT COUNT(*) FROM sightings WHERE identity_id = ?", (person,))[0][0] == 0
    assert _store_rows(memory, "SELECT COUNT(*) FROM identities WHERE identity_id = ?", (person,))[0][0] == 0
    assert _store_rows(memory, "SELECT COUNT(*) FROM observations WHERE description LIKE '%Ursula%'")[0][0] == 0
    audit = (memory / "inspector_audit.jsonl").read_text()
    assert '"action": "name"' in audit and '"action": "forget"' in audit and person in audit
    page.goto(f"{server}/people")
    assert page.locator(f"[data-person='{person}']").count() == 0
    assert not page.errors, page.errors


def _status(url: str, data: bytes | None = None, headers: dict | None = None) -> int:
    try:
        return urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers or {}), timeout=30).status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_other_sites_cannot_write_nor_read_through_another_host_name_and_a_forget_names_an_id(server, memory):
    person, name = _store_rows(memory, "SELECT identity_id, display_name FROM identities WHERE display_name != '' "
                                       "LIMIT 1")[0]
    form = urllib.parse.urlencode({"name": "Mallory"}).encode()
    assert _status(f"{server}/people/{person}/name", form, {"Origin": "https://evil.example"}) == 403
    assert _status(f"{server}/people/{person}/name", form, {"Sec-Fetch-Site": "cross-site"}) == 403
    assert _status(f"{server}/timeline", headers={"Host": "evil.example"}) == 421      # DNS rebinding
    assert _store_rows(memory, "SELECT display_name FROM identities WHERE identity_id = ?", (person,)) == [(name,)]
    # a display name is no id: forgetting must name the identity it deletes
    assert _status(f"{server}/people/{urllib.parse.quote(name)}/forget",
                   urllib.parse.urlencode({"confirm": name}).encode()) == 404
    assert _store_rows(memory, "SELECT COUNT(*) FROM sightings WHERE identity_id = ?", (person,))[0][0] > 0


def test_a_memory_copied_off_the_robot_shows_its_images(memory, tmp_path):
    moved = tmp_path / "copied_memory"
    shutil.copytree(memory, moved)                       # image paths stored absolute, under the old directory
    proc, url = _serve(moved, "--read-only")
    try:
        observation = _store_rows(moved, "SELECT observation_id FROM observations WHERE image_path IS NOT NULL "
                                         "LIMIT 1")[0][0]
        stored = Path(_store_rows(moved, "SELECT image_path FROM observations WHERE observation_id = ?",
                                  (observation,))[0][0])
        assert not stored.is_relative_to(moved)
        with urllib.request.urlopen(f"{url}/image/{observation}?thumb=1") as r:
            assert r.status == 200 and r.read()[:2] == b"\xff\xd8"        # a JPEG from the copy
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_read_only_has_no_writes_and_a_token_guards_every_request(memory, tmp_path):
    proc, url = _serve(memory, "--read-only")
    try:
        person = _store_rows(memory, "SELECT identity_id FROM identities LIMIT 1")[0][0]
        assert "Save name" not in urllib.request.urlopen(f"{url}/people/{person}").read().decode()
        assert _status(f"{url}/people/{person}/name", b"name=X") == 403
        assert _store_rows(memory, "SELECT display_name FROM identities WHERE identity_id = ?", (person,))[0][0] != "X"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    token = "t0ken-for-the-inspector-test"
    proc, url = _serve(memory, env={"EMBODIED_MEMORY_INSPECT_TOKEN": token})
    try:
        assert _status(f"{url}/timeline") == 401
        assert _status(f"{url}/image/x?thumb=1") == 401
        assert _status(f"{url}/timeline", headers={"Authorization": f"Bearer {token}"}) == 200
        assert _status(f"{url}/timeline", headers={"Authorization": "Bearer wrong-token-of-some-length"}) == 401
        import http.cookiejar
        browser_like = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        with browser_like.open(f"{url}/timeline?token={token}") as r:     # redirected without it, a cookie set
            assert r.status == 200 and "token" not in r.url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    # beyond loopback without a token: refused before serving anything
    bad = subprocess.run([str(VENV_BIN / "embodied-memory"), "inspect", "--data-dir", str(memory), "--host", "0.0.0.0"],
                         capture_output=True, text=True, timeout=60, env={k: v for k, v in os.environ.items()
                                                                           if k != "EMBODIED_MEMORY_INSPECT_TOKEN"})
    assert bad.returncode == 2 and "EMBODIED_MEMORY_INSPECT_TOKEN" in bad.stderr
    missing = subprocess.run([str(VENV_BIN / "embodied-memory"), "inspect", "--data-dir", str(tmp_path / "none")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "data_dir" in missing.stderr


def _post(url: str, fields: dict) -> tuple[int, str, str]:
    """(status, final URL, body) of a form POST as the inspector's page sends it (redirects followed)."""
    request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode(),
                                     headers={"Sec-Fetch-Site": "same-origin"})
    try:
        with urllib.request.urlopen(request, timeout=120) as r:
            return r.status, r.url, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, url, exc.read().decode()


def test_ros_mode_shows_the_running_stack_and_writes_through_its_services(memory, tmp_path):
    """``inspect --ros`` next to a running stack (memory and query agent nodes, own processes) on a
    copy of the day's memory: the pages read it; a search, a question, a name, a merge and a
    forget go to the stack, and the memory node's store shows them."""
    from embodied_memory.nodes.service_client import ServiceCallError, call_service
    from embodied_memory_interfaces.srv import GetMemoryStats
    from rosutil import LaunchedStack, wait_until
    live = _fresh_copy(memory, tmp_path / "live_memory")
    stack_file = tmp_path / "stack.yaml"
    stack_file.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{live}", timezone: Europe/Zurich}}
  query_agent:
    executable: query_agent_node
    parameters: {{planner: rules, timezone: Europe/Zurich}}
""")
    launched = LaunchedStack(stack_file, tmp_path / "launch.log")

    def stats():
        try:
            return call_service(GetMemoryStats, "/memory/stats", GetMemoryStats.Request(), timeout_s=5).stats
        except ServiceCallError:
            return None
    try:
        wait_until(stats, 120, interval=1.0, what="the memory node to serve /memory/stats")
        assert stats().timezone == "Europe/Zurich"
        proc, url = _serve(None, "--ros")
        try:
            health = urllib.request.urlopen(f"{url}/health", timeout=30).read().decode()
            assert "the running stack" in health and "/memory/query" in health
            timeline = urllib.request.urlopen(f"{url}/timeline", timeout=30).read().decode()
            assert timeline.count('class="thumb"') > 0 and "Europe/Zurich" in timeline
            found = urllib.request.urlopen(f"{url}/timeline?q={urllib.parse.quote('a person in the office')}",
                                           timeout=120).read().decode()
            assert found.count('class="score"') >= 3
            ids = [r[0] for r in _store_rows(live, "SELECT identity_id FROM identities ORDER BY identity_id")]
            named = _store_rows(live, "SELECT identity_id, display_name FROM identities WHERE display_name != '' "
                                      "ORDER BY identity_id")
            assert len(ids) >= 2 and named, ids
            keep, name = named[0]
            other = next(i for i in ids if i != keep)
            status, _, answer = _post(f"{url}/ask", {"question": f"Where did you last see {name}?"})
            assert status == 200 and 'data-status="ok"' in answer and name in answer and "now (the stack" in answer
            assert "<li><code>" in answer.split("Memory calls", 1)[1]     # the query agent's trace, over ROS
            # a name through /memory/name_identity
            status, landed, _ = _post(f"{url}/people/{other}/name", {"name": "Ursula Tester"})
            assert status == 200 and landed.split("?")[0].endswith(f"/people/{other}"), landed
            assert _store_rows(live, "SELECT display_name FROM identities WHERE identity_id = ?", (other,)) == \
                [("Ursula Tester",)]
            # a name another identity has would merge the two: the page asks first, nothing changes
            status, _, body = _post(f"{url}/people/{other}/name", {"name": name.upper()})
            assert status == 200 and "is already" in body and f"<code>{keep}</code>" in body
            assert _store_rows(live, "SELECT display_name FROM identities WHERE identity_id = ?", (other,)) == \
                [("Ursula Tester",)]
            # the merge form: an IdentityMerge to the memory node, confirmed by its Ack
            both = _store_rows(live, "SELECT COUNT(*) FROM sightings WHERE identity_id IN (?, ?)", (keep, other))[0][0]
            status, landed, body = _post(f"{url}/people/{other}/merge", {"into": keep})
            assert status == 200 and "done by the memory node" in urllib.parse.unquote(landed), (landed, body[:500])
            assert _store_rows(live, "SELECT COUNT(*) FROM sightings WHERE identity_id = ?", (keep,))[0][0] == both
            # forget through /memory/forget: the preview's counts, then nothing remains
            preview = urllib.request.urlopen(f"{url}/people/{keep}/forget", timeout=60).read().decode()
            on_tracks = _store_rows(live, "SELECT COUNT(*) FROM sightings s JOIN observations o ON o.id = s.obs WHERE "
                                          "s.identity_id IS NULL AND (s.track, o.episode_id) IN (SELECT t.track, "
                                          "w.episode_id FROM sightings t JOIN observations w ON w.id = t.obs WHERE "
                                          "t.identity_id = ?)", (keep,))[0][0]   # unidentified on their tracks go too
            assert f'data-count="sightings">{both + on_tracks}<' in preview
            status, _, body = _post(f"{url}/people/{keep}/forget", {"confirm": keep})
            assert status == 200 and "Nothing remains" in body, body[:800]
            assert _store_rows(live, "SELECT COUNT(*) FROM sightings WHERE identity_id IN (?, ?)", (keep, other)) == [(0,)]
            assert stats().identities == len(ids) - 2
            audit = (live / "inspector_audit.jsonl").read_text()
            assert all(f'"action": "{a}"' in audit for a in ("name", "merge", "forget"))
            assert "Ursula" not in audit          # a name given to an id merged into the forgotten one, too
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        # no stack on the line: --ros says so instead of serving
        assert launched.stop() == 0, launched.log()
        gone = subprocess.run([str(VENV_BIN / "embodied-memory"), "inspect", "--ros"], capture_output=True, text=True,
                              timeout=60)
        assert gone.returncode == 2 and "/memory/stats" in gone.stderr, gone.stderr
    finally:
        launched.stop()


def test_a_name_that_merges_two_identities_is_confirmed_first(memory, tmp_path):
    copy = _fresh_copy(memory, tmp_path / "memory")
    (keep, name), = _store_rows(copy, "SELECT identity_id, display_name FROM identities WHERE display_name != '' "
                                      "ORDER BY identity_id LIMIT 1")
    other = _store_rows(copy, "SELECT identity_id FROM identities WHERE identity_id != ? LIMIT 1", (keep,))[0][0]
    both = _store_rows(copy, "SELECT COUNT(*) FROM sightings WHERE identity_id IN (?, ?)", (keep, other))[0][0]
    proc, url = _serve(copy)
    try:
        status, _, body = _post(f"{url}/people/{other}/name", {"name": f" {name.lower()} "})
        assert status == 200 and "is already" in body and f"<code>{keep}</code>" in body
        assert _store_rows(copy, "SELECT COUNT(*) FROM identities WHERE identity_id IN (?, ?)", (keep, other)) == [(2,)]
        status, landed, _ = _post(f"{url}/people/{other}/name", {"name": name.lower(), "merge": "yes"})
        survivor = min(keep, other)
        assert status == 200 and landed.split("?")[0].endswith(f"/people/{survivor}"), landed
        assert _store_rows(copy, "SELECT COUNT(*) FROM sightings WHERE identity_id = ?", (survivor,)) == [(both,)]
        assert _store_rows(copy, "SELECT COUNT(*) FROM identities WHERE identity_id IN (?, ?)", (keep, other)) == [(1,)]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_stack_mode_opens_the_stacks_memory_with_its_store_and_agent_parameters(tmp_path):
    from embodied_memory.cli import build_parser
    from embodied_memory.config import ConfigError
    from embodied_memory.inspector.serve import store_backend
    stack = tmp_path / "robot.yaml"
    stack.write_text(f"""nodes:
  memory:
    executable: memory_node
    parameters: {{data_dir: "{tmp_path / 'mem'}", timezone: Europe/Zurich, text_embedder: hash, image_dim: 16}}
  query_agent:
    executable: query_agent_node
    parameters: {{planner: rules, timezone: Europe/Zurich, match_threshold: 0.5}}
""")
    parse = build_parser().parse_args
    data_dir, timezone, planner, backend = store_backend(parse(["inspect", "--stack", str(stack)]))
    assert (data_dir, timezone, planner) == (str(tmp_path / "mem"), "Europe/Zurich", "rules")
    assert (backend.store_params.text_embedder, backend.store_params.image_dim) == ("hash", 16)
    assert backend.agent_params.match_threshold == 0.5 and backend.agent_params.timezone == "Europe/Zurich"
    # the command line wins, for the store and the agent alike
    _, timezone, planner, backend = store_backend(parse(["inspect", "--stack", str(stack), "--timezone", "UTC",
                                                         "--planner", "auto"]))
    assert (timezone, planner, backend.agent_params.timezone) == ("UTC", "auto", "UTC")
    stack.write_text("nodes:\n  query_agent:\n    executable: query_agent_node\n")
    with pytest.raises(ConfigError, match="no memory_node"):
        store_backend(parse(["inspect", "--stack", str(stack)]))


def test_identity_changes_are_listed_with_consolidations_proposals_and_a_merge_is_undone(memory, tmp_path):
    copy = _fresh_copy(memory, tmp_path / "memory")
    a, b = (r[0] for r in _store_rows(copy, "SELECT identity_id FROM identities ORDER BY identity_id LIMIT 2"))
    of_b = {r[0] for r in _store_rows(copy, "SELECT id FROM sightings WHERE identity_id = ?", (b,))}
    proc, url = _serve(copy)
    try:
        status, _, body = _post(f"{url}/people/{b}/merge", {"into": a})
        assert status == 200 and not _store_rows(copy, "SELECT 1 FROM sightings WHERE identity_id = ?", (b,))
        with urllib.request.urlopen(f"{url}/identity-changes", timeout=60) as r:
            page = r.read().decode()
        assert "Propose merges and splits" in page and 'class="proposal"' not in page
        with urllib.request.urlopen(f"{url}/identity-changes?propose=1", timeout=60) as r:
            proposals = r.read().decode()
        assert "No merges or splits to propose" in proposals or 'class="proposal"' in proposals
        (change,), = _store_rows(copy, "SELECT id FROM identity_changes WHERE kind = 'merge' AND source = ?", (b,))
        assert f'action="/identity-changes/{change}/undo"' in page
        assert _post(f"{url}/identity-changes/consolidate", {})[0] == 400          # not without confirm=yes
        status, landed, body = _post(f"{url}/identity-changes/{change}/undo", {})
        assert status == 200 and "sightings moved back" in landed.replace("%20", " ")
        assert {r[0] for r in _store_rows(copy, "SELECT id FROM sightings WHERE identity_id = ?", (b,))} == of_b
        assert f"/identity-changes/{change}/undo" not in body and "undone" in body      # once only
    finally:
        proc.terminate()
        proc.wait(timeout=10)
