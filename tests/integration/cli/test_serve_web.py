"""The chat page of `cherenkov serve` (GET /) in headless Chromium, driven by keyboard through
WebDriver: it loads without console errors, a prompt sent with Enter streams its answer, which
equals the API's greedy text for the same conversation, Esc stops a long answer, server-side
sessions switch on and off (each giving the API's text for the whole conversation), and the page
fits a narrow window. A failing test leaves a screenshot, the page's HTML and the console log in
$CHERENKOV_TEST_ARTIFACTS (default: the test's temporary directory). Skips when Debian's chromium
or chromium-driver is absent."""
import contextlib
import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import REPO
from serve_harness import Server
from test_bench_suite import WebDriver, find_browser

ENTER = "\ue007"
ESCAPE = "\ue00c"


@pytest.fixture(scope="module")
def server(cherenkov_bin, store):
    # --no-eos: every answer runs to its token budget, so "long" is long.
    s = Server(cherenkov_bin, store, "--no-eos")
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


class Page(WebDriver):
    """WebDriver with elements: typing (keys included) and clicking, as a keyboard user would."""

    def element(self, css):
        found = self.call("POST", f"/session/{self.session}/element",
                          {"using": "css selector", "value": css})
        return next(iter(found.values()))

    def type(self, css, text):
        self.call("POST", f"/session/{self.session}/element/{self.element(css)}/value",
                  {"text": text})

    def click(self, css):
        self.call("POST", f"/session/{self.session}/element/{self.element(css)}/click", {})

    def clear(self, css):
        self.call("POST", f"/session/{self.session}/element/{self.element(css)}/clear", {})

    def window(self, width, height):
        self.call("POST", f"/session/{self.session}/window/rect", {"width": width, "height": height})

    def wait(self, script, timeout=60, what="the page"):
        deadline = time.monotonic() + timeout
        while True:
            value = self.script(script)
            if value:
                return value
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {script}"
            time.sleep(0.05)


@pytest.fixture(scope="module")
def page(server):
    chromium, driver_path = find_browser()
    try:
        driver = Page(chromium, driver_path)
    except (OSError, KeyError, urllib.error.URLError) as e:
        pytest.skip(f"Chromium cannot run here: {e}")
    driver.open(server.url + "/")
    driver.wait("return document.readyState === 'complete' && window.cherenkovChat !== undefined")
    yield driver
    driver.close()


@contextlib.contextmanager
def artifacts(page, name, tmp_path):
    """Saves a screenshot, the page's HTML and the console log when the block fails."""
    try:
        yield
    except BaseException:
        out = Path(os.environ.get("CHERENKOV_TEST_ARTIFACTS") or tmp_path)
        out.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Exception):
            (out / f"{name}.png").write_bytes(page.screenshot())
            (out / f"{name}.html").write_text(page.script("return document.documentElement.outerHTML"))
            (out / f"{name}.console.json").write_text(json.dumps(page.console(), indent=1))
        print(f"artifacts of {name}: {out}")
        raise


def metrics_served(server):
    try:
        with urllib.request.urlopen(server.url + "/metrics", timeout=10):
            return True
    except urllib.error.HTTPError:
        return False


def console_errors(page, server):
    """Severe console entries; a 404 for /metrics is the page asking a server without statistics,
    which it shows as "-"."""
    absent = not metrics_served(server)
    return [e for e in page.console() if e.get("level") == "SEVERE"
            and not (absent and "/metrics" in e.get("message", ""))]


def api_text(server, messages, max_tokens):
    status, _, body = server.post("/v1/chat/completions", {
        "model": "cherenkov", "messages": messages, "max_tokens": max_tokens})
    assert status == 200, body
    return body["choices"][0]["message"]["content"]


def new_chat(page, max_tokens, session=False):
    page.click("#new-chat")
    page.clear("#max-tokens")
    page.type("#max-tokens", str(max_tokens))
    if page.script("return document.getElementById('use-session').checked") != session:
        page.click("#use-session")


def send(page, text):
    """Types `text` and Enter; returns the finished answer's element data."""
    before = page.script("return document.querySelectorAll('.message.assistant').length")
    page.type("#prompt", text + ENTER)
    page.wait(f"return document.querySelectorAll('.message.assistant').length > {before}",
              what="the answer to start")
    return page.wait("const m = [...document.querySelectorAll('.message.assistant')].pop();"
                     "return m.dataset.finish ? {raw: m.dataset.raw, finish: m.dataset.finish,"
                     " usage: (m.querySelector('.usage') || {}).textContent} : null",
                     timeout=120, what="the answer to finish")


def test_the_page_is_served_from_the_binary(server):
    for path, kind in [("/", "text/html"), ("/app.js", "text/javascript"), ("/style.css", "text/css")]:
        with urllib.request.urlopen(server.url + path, timeout=10) as resp:
            assert resp.status == 200 and resp.headers["Content-Type"].startswith(kind)
            assert resp.headers["Content-Security-Policy"].startswith("default-src 'self'")
            assert len(resp.read()) > 500
    page_html = (REPO / "src" / "serving" / "web" / "index.html").read_bytes()
    with urllib.request.urlopen(server.url + "/", timeout=10) as resp:
        assert resp.read() == page_html


def test_a_prompt_streams_and_equals_the_api(page, server, tmp_path):
    with artifacts(page, "stream", tmp_path):
        new_chat(page, 160)
        # Record the answer's length at every change, to see it arrive in pieces.
        page.script("window.seenLengths = []; new MutationObserver(() => {"
                    " const m = [...document.querySelectorAll('.message.assistant')].pop();"
                    " if (m) window.seenLengths.push(m.dataset.raw.length); })"
                    ".observe(document.getElementById('messages'),"
                    " {subtree: true, childList: true, attributes: true});")
        prompt = "Write a Python function that reverses a list."
        answer = send(page, prompt)
        assert answer["finish"] == "length"
        assert answer["raw"] == api_text(server, [{"role": "user", "content": prompt}], 160)
        lengths = sorted(set(page.script("return window.seenLengths")))
        assert len([n for n in lengths if 0 < n < len(answer["raw"])]) >= 2, lengths
        assert "generated 160" in answer["usage"] and "tok/s" in answer["usage"]
        shown = page.script("return [...document.querySelectorAll('.message.assistant')].pop()"
                            ".querySelector('.text').textContent")
        assert shown.strip() != ""
        assert not console_errors(page, server)


def test_code_is_rendered_as_code_and_html_is_escaped(page, server, tmp_path):
    with artifacts(page, "render", tmp_path):
        out = page.script("""
            const div = document.createElement('div');
            window.cherenkovRender(div, 'Use <b>bold</b> and `x = 1`.\\n\\n```python\\n'
                                        + 'print("<img src=x onerror=alert(1)>")\\n```\\nDone.');
            return {bold: div.querySelectorAll('b, img').length,
                    pre: [...div.querySelectorAll('pre > code')].map(c => [c.dataset.lang, c.textContent]),
                    inline: [...div.querySelectorAll('p > code')].map(c => c.textContent),
                    text: div.textContent};""")
        assert out["bold"] == 0
        assert out["pre"] == [["python", 'print("<img src=x onerror=alert(1)>")']]
        assert out["inline"] == ["x = 1"]
        assert "<b>bold</b>" in out["text"] and "Done." in out["text"]


def test_escape_stops_a_long_answer(page, server, tmp_path):
    with artifacts(page, "stop", tmp_path):
        new_chat(page, 3000)
        page.type("#prompt", "Write a long Python module." + ENTER)
        page.wait("const m = [...document.querySelectorAll('.message.assistant')].pop();"
                  "return m && m.dataset.raw.length > 20", what="text to arrive")
        assert page.script("return !document.getElementById('stop').disabled")
        page.type("#prompt", ESCAPE)
        answer = page.wait("const m = [...document.querySelectorAll('.message.assistant')].pop();"
                           "return m.dataset.finish ? {finish: m.dataset.finish, usage:"
                           " m.querySelector('.usage').textContent} : null",
                           timeout=60, what="the stop")
        assert answer["finish"] == "cancelled", answer
        generated = int(answer["usage"].split("generated ")[1].split(" ")[0])
        assert 0 < generated < 3000
        assert page.script("return document.getElementById('status').textContent") == "Stopped."
        assert not console_errors(page, server)


def test_sessions_switch_on_and_off(page, server, tmp_path):
    with artifacts(page, "sessions", tmp_path):
        new_chat(page, 16, session=True)
        first, second, third = "Write is_even(n).", "Now write is_odd(n).", "Add docstrings."
        a1 = send(page, first)["raw"]
        a2 = send(page, second)["raw"]
        session = page.script("return window.cherenkovChat.session")
        assert session and session.startswith("session-")
        status, _, info = server.request("GET", f"/v1/sessions/{session}")
        assert status == 200 and info["turns"] == 2 and info["messages"] == 4
        history = [{"role": "user", "content": first}, {"role": "assistant", "content": a1},
                   {"role": "user", "content": second}]
        assert a1 == api_text(server, history[:1], 16)
        assert a2 == api_text(server, history, 16)
        # Off: the next turn sends the whole conversation, and the session is left alone.
        page.click("#use-session")
        a3 = send(page, third)["raw"]
        assert page.script("return window.cherenkovChat.session") is None
        history += [{"role": "assistant", "content": a2}, {"role": "user", "content": third}]
        assert a3 == api_text(server, history, 16)
        status, _, info = server.request("GET", f"/v1/sessions/{session}")
        assert info["turns"] == 2
        assert not console_errors(page, server)


def test_readable_on_a_narrow_window(page, server, tmp_path):
    with artifacts(page, "narrow", tmp_path):
        page.window(420, 900)
        try:
            assert page.script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
            # One column: the conversation, then the settings; the composer stays usable.
            assert page.script("return document.getElementById('prompt').getBoundingClientRect().width > 300")
            png = page.screenshot()
            assert png.startswith(b"\x89PNG")
            (tmp_path / "narrow.png").write_bytes(png)
        finally:
            page.window(1400, 1000)
        assert page.script("return document.querySelectorAll('.message.assistant pre, .message.assistant p').length") > 0
        assert not console_errors(page, server)
