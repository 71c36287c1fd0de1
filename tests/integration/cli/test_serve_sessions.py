"""Sessions and the prefix cache of `cherenkov serve` on the bundled model (models/tiny-python):
a two-turn session equals the same conversation sent whole to a server without a cache; a
repeated prompt and a shared long prefix report cached tokens and give exactly the text computed
afresh; cancellation mid-turn keeps the last committed turn and the retry equals a first try;
sampling settings inherit and an explicit seed restarts the stream; 404 and 409; eviction by
count, bytes and idle time in both stores; tool calls in a session's history carried to the next
turn; the retention flags' bounds."""
import threading
import time

import pytest

from conftest import REPO
from serve_harness import Server

MODEL = REPO / "models" / "tiny-python"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}]


@pytest.fixture(scope="module")
def fresh(cherenkov_bin, store):
    """A server without a prefix cache: every prompt is computed afresh."""
    s = Server(cherenkov_bin, store, "--prefix-cache-mb", "0")
    yield s
    assert s.stop() == 0, s.stderr()
    s.close()


@pytest.fixture
def make_server(cherenkov_bin, store):
    started = []

    def make(*flags, model=None):
        s = Server(cherenkov_bin, model or store, *flags)
        started.append(s)
        return s
    yield make
    for s in started:
        s.close()


def chat(server, messages, expect=200, **fields):
    status, _, body = server.post("/v1/chat/completions", {"messages": messages, **fields})
    assert status == expect, body
    return body


def user(content):
    return {"role": "user", "content": content}


def reply_of(body):
    return body["choices"][0]["message"]["content"]


def new_session(server, expect=200, **fields):
    status, _, body = server.post("/v1/sessions", fields)
    assert status == expect, body
    return body["id"] if status == 200 else body


def session_info(server, sid, expect=200):
    status, _, body = server.request("GET", f"/v1/sessions/{sid}")
    assert status == expect, body
    return body


def turn(server, sid, messages, expect=200, **fields):
    return chat(server, messages, expect, session_id=sid, **fields)


# ---- sessions equal whole conversations; the cache changes no byte ----

def test_a_two_turn_session_equals_the_conversation_sent_whole(server, fresh):
    sid = new_session(server)
    first = turn(server, sid, [user("Write a function that reverses a list.")], max_tokens=40)
    second = turn(server, sid, [user("Now make it sort the list.")], max_tokens=40)
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    whole = [user("Write a function that reverses a list."),
             {"role": "assistant", "content": reply_of(first)},
             user("Now make it sort the list.")]
    afresh = chat(fresh, whole, max_tokens=40)
    assert afresh["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert reply_of(second) == reply_of(afresh)
    assert second["usage"]["prompt_tokens"] == afresh["usage"]["prompt_tokens"]
    info = session_info(server, sid)
    assert info["turns"] == 2 and info["messages"] == 4 and not info["busy"]
    assert info["history_bytes"] > 0
    usage = info["usage"]
    assert usage["prompt_tokens"] == first["usage"]["prompt_tokens"] + second["usage"]["prompt_tokens"]
    assert usage["generated_tokens"] == (first["usage"]["completion_tokens"]
                                         + second["usage"]["completion_tokens"])
    assert usage["cached_tokens"] == second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert usage["prefill_seconds"] > 0 and usage["decode_seconds"] > 0


def test_a_repeated_prompt_reports_cached_tokens_and_identical_output(server, fresh):
    messages = [user("Write a Python function that checks whether a number is prime.")]
    first = chat(server, messages, max_tokens=48)
    again = chat(server, messages, max_tokens=48)
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == again["usage"]["prompt_tokens"]
    assert again["timings"]["prefill_chunks"] == 0
    assert reply_of(again) == reply_of(first) == reply_of(chat(fresh, messages, max_tokens=48))
    # Streams report the same in their usage chunk.
    events = list(server.stream("/v1/chat/completions", {
        "messages": messages, "max_tokens": 48, "stream": True,
        "stream_options": {"include_usage": True}}))
    usage = [e for e in events if e != "[DONE]" and not e["choices"]][0]["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] == usage["prompt_tokens"]
    text = "".join(e["choices"][0]["delta"].get("content") or ""
                   for e in events if e != "[DONE]" and e["choices"])
    assert text == reply_of(first)


def test_a_sampled_requests_checkpoint_does_not_serve_a_speculating_one(make_server, fresh):
    # A sampled request keeps no MTP residuals; a greedy one (which drafts) must not start from
    # its checkpoint, and then saves one it can use.
    s = make_server()
    messages = [user("Write a function that merges two sorted lists.")]
    chat(s, messages, max_tokens=8, temperature=1.0, seed=3)
    greedy = chat(s, messages, max_tokens=40)
    assert greedy["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert greedy["timings"]["drafts_proposed"] > 0
    assert reply_of(greedy) == reply_of(chat(fresh, messages, max_tokens=40))
    again = chat(s, messages, max_tokens=40)
    assert again["usage"]["prompt_tokens_details"]["cached_tokens"] == again["usage"]["prompt_tokens"]
    assert reply_of(again) == reply_of(greedy)


def test_a_shared_long_prefix_is_restored_and_the_text_is_unchanged(make_server, fresh, run_cli, store):
    shared = (MODEL / "heldout_sample.txt").read_text()[:2500]
    s = make_server("--prefix-cache-interval", "128")
    out = {}
    for ending in ("\n\ndef first_helper(", "\n\nclass Second:"):
        body = {"prompt": shared + ending, "max_tokens": 24}
        status, _, cached = s.post("/v1/completions", body)
        assert status == 200
        status, _, afresh = fresh.post("/v1/completions", body)
        assert cached["choices"][0]["text"] == afresh["choices"][0]["text"]
        out[ending] = cached
    second = out["\n\nclass Second:"]
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] >= 128
    assert second["timings"]["cache_restore_seconds"] >= 0
    assert out["\n\ndef first_helper("]["timings"]["cache_checkpoints_saved"] >= 2


# ---- cancellation, retries, settings ----

def test_cancelling_mid_turn_keeps_the_last_committed_turn_and_the_retry_equals_a_first_try(make_server):
    s = make_server("--no-eos")
    sid = new_session(s)
    turn(s, sid, [user("Write a function that adds two numbers.")], max_tokens=16)
    committed = session_info(s, sid)
    events = []
    body = {"session_id": sid, "messages": [user("Now subtract them.")], "max_tokens": 1500,
            "stream": True, "request_id": "turn-two"}
    for event in s.stream("/v1/chat/completions", body):
        events.append(event)
        if len(events) == 3:
            status, _, answer = s.post("/v1/requests/turn-two/cancel", b"")
            assert status == 200 and answer["cancelled"] is True
    finals = [e for e in events if e != "[DONE]" and e["choices"] and e["choices"][0]["finish_reason"]]
    assert finals[-1]["choices"][0]["finish_reason"] == "cancelled"
    after = session_info(s, sid)
    assert after["turns"] == 1
    assert after["history_bytes"] == committed["history_bytes"]
    assert after["usage"] == committed["usage"]
    retry = turn(s, sid, [user("Now subtract them.")], max_tokens=16)

    # The same two turns in another session, never cancelled.
    other = new_session(s)
    turn(s, other, [user("Write a function that adds two numbers.")], max_tokens=16)
    first_try = turn(s, other, [user("Now subtract them.")], max_tokens=16)
    assert reply_of(retry) == reply_of(first_try)
    assert session_info(s, sid)["turns"] == 2


def test_sampling_settings_inherit_and_an_explicit_seed_restarts_the_stream(server):
    q1, q2, q3 = user("Write a sorting function."), user("Add a docstring."), user("Add type hints.")
    sid = new_session(server, temperature=1.0, seed=42)
    a1 = turn(server, sid, [q1], max_tokens=20)
    # The first turn runs the session's settings from a fresh stream seeded 42.
    assert reply_of(a1) == reply_of(chat(server, [q1], max_tokens=20, temperature=1.0, seed=42))
    # An explicit seed restarts the stream; temperature is still inherited.
    b = turn(server, sid, [q2], max_tokens=20, seed=7)
    whole = [q1, {"role": "assistant", "content": reply_of(a1)}, q2]
    assert reply_of(b) == reply_of(chat(server, whole, max_tokens=20, temperature=1.0, seed=7))
    info = session_info(server, sid)
    assert info["sampling"]["seed"] == 7 and info["sampling"]["temperature"] == 1.0
    # Without a seed the committed stream continues: another session taking the same turns
    # gets the same text.
    c = turn(server, sid, [q3], max_tokens=20)
    twin = new_session(server, temperature=1.0, seed=42)
    turn(server, twin, [q1], max_tokens=20)
    turn(server, twin, [q2], max_tokens=20, seed=7)
    assert reply_of(turn(server, twin, [q3], max_tokens=20)) == reply_of(c)
    # A greedy turn: temperature 0 is committed and inherited by the next turn.
    turn(server, sid, [user("Shorter, please.")], max_tokens=8, temperature=0)
    assert session_info(server, sid)["sampling"]["temperature"] == 0


def test_missing_sessions_are_404_and_busy_ones_409(make_server):
    s = make_server("--no-eos")
    status, _, body = s.post("/v1/chat/completions", {"session_id": "session-missing",
                                                      "messages": [user("hi")], "max_tokens": 2})
    assert status == 404 and body["error"]["code"] == "session_not_found"
    assert s.request("GET", "/v1/sessions/session-missing")[0] == 404
    assert s.request("DELETE", "/v1/sessions/session-missing")[0] == 404
    sid = new_session(s)
    out = {}

    def long_turn():
        out["answer"] = s.post("/v1/chat/completions", {"session_id": sid, "messages": [user("go")],
                                                        "max_tokens": 3000, "request_id": "busy-turn"})
    t = threading.Thread(target=long_turn)
    t.start()
    deadline = time.monotonic() + 30
    while not session_info(s, sid)["busy"]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    status, _, body = s.post("/v1/chat/completions", {"session_id": sid, "messages": [user("again")],
                                                      "max_tokens": 2})
    assert status == 409 and body["error"]["code"] == "session_busy"
    assert s.request("DELETE", f"/v1/sessions/{sid}")[0] == 409
    s.post("/v1/requests/busy-turn/cancel", b"")
    t.join(timeout=60)
    assert out["answer"][2]["choices"][0]["finish_reason"] == "cancelled"
    status, _, body = s.request("DELETE", f"/v1/sessions/{sid}")
    assert status == 200 and body == {"id": sid, "object": "session.deleted", "deleted": True}
    assert s.request("GET", f"/v1/sessions/{sid}")[0] == 404


def test_session_bodies_are_validated(server):
    for body, param in [({"context_tokens": 5000}, "context_tokens"), ({"context_tokens": 0}, "context_tokens"),
                        ({"temperature": 3}, "temperature"), ({"colour": "red"}, "colour"),
                        ({"seed": "x"}, "seed")]:
        status, _, answer = server.post("/v1/sessions", body)
        assert status == 400 and answer["error"]["param"] == param, (body, answer)
    status, _, answer = server.post("/v1/completions", {"prompt": "x", "session_id": "s"})
    assert status == 400 and answer["error"]["param"] == "session_id"
    # context_tokens bounds every turn's prompt, output and headroom.
    sid = new_session(server, context_tokens=64)
    status, _, answer = server.post("/v1/chat/completions", {"session_id": sid,
                                                             "messages": [user("hi")], "max_tokens": 60})
    assert status == 400 and answer["error"]["code"] == "context_length_exceeded"
    assert "context_tokens" in answer["error"]["message"]


# ---- retention ----

def test_sessions_are_evicted_by_count_and_expire_when_idle(make_server):
    s = make_server("--max-sessions", "2", "--session-idle-seconds", "2")
    a, b = new_session(s), new_session(s)
    turn(s, b, [user("hi")], max_tokens=2)  # b is now the most recent
    c = new_session(s)
    session_info(s, a, expect=404)
    session_info(s, b)
    session_info(s, c)
    time.sleep(3.5)
    session_info(s, b, expect=404)
    session_info(s, c, expect=404)


def completion(server, prompt, max_tokens=4):
    status, _, body = server.post("/v1/completions", {"prompt": prompt, "max_tokens": max_tokens})
    assert status == 200, body
    return body


def cached(body):
    return body["usage"]["prompt_tokens_details"]["cached_tokens"]


def test_prefix_checkpoints_are_evicted_by_count_bytes_and_idle_time(make_server):
    p1, p2 = "def alpha(x):\n    return x + 1\n", "def beta(y):\n    return y * 2\n"
    by_count = make_server("--prefix-cache-entries", "1", "--prefix-cache-interval", "0")
    completion(by_count, p1)
    completion(by_count, p2)  # evicts p1's checkpoint
    assert cached(completion(by_count, p1)) == 0
    assert cached(completion(by_count, p1)) > 0

    # One short checkpoint of this model takes most of 1 MiB: the second evicts the first, and a
    # long prompt's checkpoint does not fit at all.
    by_bytes = make_server("--prefix-cache-mb", "1", "--prefix-cache-interval", "0")
    first = completion(by_bytes, p1)
    assert 512 * 1024 < first["timings"]["cache_checkpoint_bytes"] <= 1024 * 1024
    completion(by_bytes, p2)
    assert cached(completion(by_bytes, p1)) == 0
    long_prompt = (MODEL / "heldout_sample.txt").read_text()[:1500]
    oversized = completion(by_bytes, long_prompt)
    assert oversized["timings"]["cache_checkpoints_saved"] == 0
    assert cached(completion(by_bytes, long_prompt)) == 0

    by_idle = make_server("--prefix-cache-idle-seconds", "1", "--prefix-cache-interval", "0")
    completion(by_idle, p1)
    assert cached(completion(by_idle, p1)) > 0
    time.sleep(2.5)
    assert cached(completion(by_idle, p1)) == 0


# ---- tool calls in session history ----

def test_tool_calls_in_a_session_are_carried_to_the_next_turn(make_server, coder_store):
    s = make_server(model=coder_store)
    afresh = make_server("--prefix-cache-mb", "0", model=coder_store)
    call = {"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": '{"city": "Paris", "days": 3}'}}
    opening = [user("What is the weather in Paris?"),
               {"role": "assistant", "content": None, "tool_calls": [call]},
               {"role": "tool", "tool_call_id": "call_1", "content": "21 C and sunny"}]
    sid = new_session(s)
    first = turn(s, sid, opening, max_tokens=24, tools=TOOLS)
    second = turn(s, sid, [user("And tomorrow?")], max_tokens=24, tools=TOOLS)
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] > 0
    whole = opening + [{"role": "assistant", "content": reply_of(first)}, user("And tomorrow?")]
    expected = chat(afresh, whole, max_tokens=24, tools=TOOLS)
    assert reply_of(second) == reply_of(expected)
    assert second["usage"]["prompt_tokens"] == expected["usage"]["prompt_tokens"]
    assert session_info(s, sid)["messages"] == 6


def test_retention_flags_are_checked(run_cli, store):
    for flag, value in [("--prefix-cache-mb", "-1"), ("--prefix-cache-entries", "0"),
                        ("--max-sessions", "0"), ("--session-memory-mb", "0"),
                        ("--session-idle-seconds", "-5"), ("--prefix-cache-interval", "x")]:
        result = run_cli("serve", store, flag, value, check=False)
        assert result.returncode == 2, (flag, value, result.stderr)
        assert flag in result.stderr
