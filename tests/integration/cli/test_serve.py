"""`cherenkov serve` on the bundled model (models/tiny-python), through the official `openai`
client and raw HTTP: JSON and streaming chat and completions equal to the CLI's greedy text,
usage, stop strings, log-probabilities against `cherenkov logits`, validation and refusals,
interleaved streams, cancellation, disconnects, limits and shutdown."""
import json
import math
import socket
import threading
import time

import pytest

from conftest import REPO
from serve_harness import BACKEND, Server, json_body, status_of

MODEL = REPO / "models" / "tiny-python"
PROMPT = "def fibonacci(n):"
CHAT = "Write a Python function that reverses a list."


@pytest.fixture
def make_server(cherenkov_bin, store):
    started = []

    def make(*flags):
        s = Server(cherenkov_bin, store, *flags)
        started.append(s)
        return s
    yield make
    for s in started:
        s.close()


@pytest.fixture(scope="module")
def client(server):
    # The GPU machine has no openai package (and no network): those cases skip there.
    openai = pytest.importorskip("openai")
    return openai.OpenAI(base_url=server.url + "/v1", api_key="unused", max_retries=0)


def cli_text(run_cli, store, prompt, max_tokens, *flags):
    result = run_cli(store, prompt, "--max-tokens", max_tokens, "--backend", BACKEND, *flags)
    assert result.stdout.endswith("\n")
    return result.stdout[:-1]


def chat_body(content=CHAT, **fields):
    return {"model": "cherenkov", "messages": [{"role": "user", "content": content}], **fields}


def collect_stream(events):
    """(text, finish_reason, usage chunk or None, events) of a chat or completion stream."""
    text, finish, usage, seen = "", None, None, []
    for event in events:
        seen.append(event)
        if event == "[DONE]":
            break
        if not event["choices"]:
            usage = event["usage"]
            continue
        choice = event["choices"][0]
        text += choice.get("delta", {}).get("content") or choice.get("text") or ""
        if choice["finish_reason"]:
            finish = choice["finish_reason"]
    assert seen[-1] == "[DONE]"
    return text, finish, usage, seen


# ---- endpoints, formats, equality with the CLI ----

def test_health_and_models(server):
    status, _, body = server.request("GET", "/health")
    assert (status, body) == (200, {"status": "ok"})
    status, _, body = server.request("GET", "/v1/models")
    assert status == 200 and body["object"] == "list"
    assert body["data"][0]["id"] == "cherenkov"
    status, _, body = server.request("GET", "/v1/models/cherenkov")
    assert status == 200 and body["id"] == "cherenkov"
    assert server.request("GET", "/v1/models/gpt-4")[0] == 404


def test_chat_json_equals_the_cli(server, client, run_cli, store):
    expected = cli_text(run_cli, store, CHAT, 40)
    response = client.chat.completions.create(model="cherenkov", messages=[{"role": "user", "content": CHAT}],
                                              max_tokens=40)
    choice = response.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == expected
    assert choice.finish_reason in ("stop", "length")
    assert response.object == "chat.completion" and response.id.startswith("chatcmpl-")
    assert response.usage.prompt_tokens > 0
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens
    assert response.usage.prompt_tokens_details.cached_tokens == 0
    if choice.finish_reason == "length":
        assert response.usage.completion_tokens == 40


def test_completion_json_and_stream_equal_the_raw_cli(server, client, run_cli, store):
    expected = cli_text(run_cli, store, PROMPT, 48, "--raw")
    response = client.completions.create(model="cherenkov", prompt=PROMPT, max_tokens=48)
    assert response.choices[0].text == expected
    assert response.object == "text_completion"
    text, finish, usage, _ = collect_stream(server.stream("/v1/completions", {
        "prompt": PROMPT, "max_tokens": 48, "stream": True, "stream_options": {"include_usage": True}}))
    assert text == expected
    assert finish == response.choices[0].finish_reason
    assert usage["completion_tokens"] == response.usage.completion_tokens
    assert usage["prompt_tokens"] == response.usage.prompt_tokens


def test_chat_stream_with_the_openai_client(client, run_cli, store):
    expected = cli_text(run_cli, store, CHAT, 40)
    chunks = list(client.chat.completions.create(
        model="cherenkov", messages=[{"role": "user", "content": CHAT}], max_tokens=40, stream=True,
        stream_options={"include_usage": True}))
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == expected
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert len(finals) == 1
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])
    assert len({c.id for c in chunks}) == 1


def test_request_id_and_header(server):
    status, headers, body = server.post("/v1/chat/completions", chat_body(max_tokens=4, request_id="my-turn_1"))
    assert status == 200
    assert headers["X-Request-ID"] == "my-turn_1"
    assert body["id"] == "chatcmpl-my-turn_1"
    status, headers, body = server.post("/v1/chat/completions", chat_body(max_tokens=4))
    assert status == 200 and body["id"] == "chatcmpl-" + headers["X-Request-ID"]
    for bad in ("", "x" * 81, "bad id", "é"):
        status, _, body = server.post("/v1/chat/completions", chat_body(max_tokens=4, request_id=bad))
        assert status == 400 and body["error"]["param"] == "request_id"


# ---- stop strings and log-probabilities ----

def test_stop_strings_cut_across_token_boundaries(server, run_cli, store):
    full = cli_text(run_cli, store, PROMPT, 48, "--raw")
    # The generated pieces, as the server reports them with logprobs.
    status, _, body = server.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 48, "logprobs": 0})
    pieces = body["choices"][0]["logprobs"]["tokens"]
    assert "".join(pieces) == full
    # A stop string that starts inside one token and ends inside a later one.
    k = next(i for i in range(len(pieces) - 2) if len(pieces[i]) >= 2 and (pieces[i + 1] + pieces[i + 2]).strip())
    offset = sum(len(p) for p in pieces[:k + 1]) - 1
    stop = full[offset:offset + len(pieces[k + 1]) + 2]
    assert len(stop) >= 3
    expected = full[:full.find(stop)]
    status, _, body = server.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 48, "stop": [stop, "\x00never"]})
    assert status == 200
    assert body["choices"][0]["text"] == expected
    assert body["choices"][0]["finish_reason"] == "stop"
    text, finish, _, _ = collect_stream(server.stream("/v1/completions", {
        "prompt": PROMPT, "max_tokens": 48, "stop": stop, "stream": True}))
    assert (text, finish) == (expected, "stop")


def log_softmax(row):
    m = max(row)
    z = m + math.log(sum(math.exp(x - m) for x in row))
    return [x - z for x in row]


def test_logprobs_equal_cherenkov_logits(server, run_cli, store):
    n = 5
    status, _, body = server.post("/v1/completions", {"prompt": PROMPT, "max_tokens": n, "logprobs": 3})
    assert status == 200
    lp = body["choices"][0]["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == n
    assert "".join(lp["tokens"]) == body["choices"][0]["text"]
    # Greedy: each chosen token is the best of its row. Rebuild the ids row by row from the
    # reference logits and compare every figure.
    ids = json.loads(run_cli("tokenize", store, PROMPT, "--json").stdout)["ids"]
    for k in range(n):
        logits = json.loads(run_cli("logits", store, "--tokens", ",".join(map(str, ids)), "--full", "--json",
                                    "--backend", BACKEND).stdout)["logits"]
        row = log_softmax(logits[-1])
        best = sorted(range(len(row)), key=lambda i: (-row[i], i))[:3]
        assert abs(lp["token_logprobs"][k] - row[best[0]]) < 2e-3
        assert [round(v, 2) for v in sorted(lp["top_logprobs"][k].values(), reverse=True)] == \
            [round(row[i], 2) for i in best]
        ids.append(best[0])
    status, _, chat = server.post("/v1/chat/completions", chat_body(
        content=PROMPT, max_tokens=6, logprobs=True, top_logprobs=2))
    assert status == 200
    entries = chat["choices"][0]["logprobs"]["content"]
    assert len(entries) == chat["usage"]["completion_tokens"]
    for e in entries:
        assert len(e["top_logprobs"]) == 2
        assert e["top_logprobs"][0]["logprob"] >= e["top_logprobs"][1]["logprob"]
        assert abs(e["logprob"] - e["top_logprobs"][0]["logprob"]) < 1e-6
        assert bytes(e["bytes"]).decode(errors="replace") == e["token"]


# ---- validation and refusals ----

@pytest.mark.parametrize("field,value", [
    ("n", 2), ("response_format", {"type": "json_object"}), ("reasoning_effort", "high"),
    ("logit_bias", {"1": 5}), ("chat_template_kwargs", {"enable_thinking": True}), ("frobnicate", 1),
    ("temperature", -1), ("temperature", "hot"), ("top_p", 0), ("max_tokens", 0), ("top_logprobs", 3),
    ("stop", ["a", "b", "c", "d", "e"]), ("stop", [""]), ("stream_options", {"include_usage": True}),
    ("tool_choice", "required"), ("parallel_tool_calls", False),
])
def test_refused_fields_name_the_field(server, field, value):
    status, _, body = server.post("/v1/chat/completions", chat_body(**{"max_tokens": 4, field: value}))
    assert status == 400, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["param"] == field or field in error["message"]


def test_ignored_fields_are_accepted(server):
    status, _, body = server.post("/v1/chat/completions", chat_body(
        max_tokens=2, user="u-1", metadata={"k": "v"}, store=False, response_format={"type": "text"}))
    assert status == 200, body


def test_messages_are_validated(server):
    cases = [
        [{"role": "bot", "content": "hi"}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}],
        [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}],
        [{"role": "system", "content": "only a system message"}],
        "not a list",
        [],
    ]
    for messages in cases:
        status, _, body = server.post("/v1/chat/completions", {"messages": messages, "max_tokens": 2})
        assert status == 400, (messages, body)
        assert body["error"]["param"] == "messages"


def test_tools_are_validated(server):
    good = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}
    status, _, body = server.post("/v1/chat/completions", chat_body(max_tokens=4, tools=[good]))
    assert status == 200, body
    assert body["choices"][0]["message"].get("tool_calls") is None
    bad = [
        {"type": "function", "function": {"name": "bad name"}},
        {"type": "function", "function": {"name": "f", "strict": True, "parameters": {"type": "object"}}},
        {"type": "function", "function": {"name": "f", "parameters": {"type": "array"}}},
        {"type": "retrieval"},
    ]
    for tool in bad:
        status, _, body = server.post("/v1/chat/completions", chat_body(max_tokens=4, tools=[tool]))
        assert status == 400 and body["error"]["param"] == "tools", (tool, body)


def test_malformed_bodies(server):
    status, _, body = server.post("/v1/chat/completions", "{not json")
    assert status == 400 and "JSON" in body["error"]["message"]
    status, _, body = server.post("/v1/chat/completions", "[1, 2]")
    assert status == 400
    status, _, body = server.post("/v1/chat/completions", "[" * 100000)
    assert status == 400
    status, _, body = server.post("/v1/completions", {"prompt": PROMPT, "max_tokens": "many"})
    assert status == 400 and body["error"]["param"] == "max_tokens"
    status, _, body = server.post("/v1/completions", {"prompt": [9999999], "max_tokens": 2})
    assert status == 400 and body["error"]["param"].startswith("prompt")
    status, _, body = server.post("/v1/nothing", {})
    assert status == 404 and body["error"]["type"] == "not_found_error"


def test_oversized_and_unsized_bodies(server):
    big = json.dumps({"prompt": "x" * (9 * 1024 * 1024), "max_tokens": 1})
    status, _, body = server.post("/v1/completions", big)
    assert status == 413 and "error" in body
    chunked = (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    answer = server.raw(chunked)
    assert status_of(answer) == 411 and "error" in json_body(answer)


def test_context_overflow(server):
    status, _, body = server.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 5000})
    assert status == 400
    assert body["error"]["code"] == "context_length_exceeded"
    assert "4096" in body["error"]["message"]
    status, _, body = server.post("/v1/completions", {"prompt": "x " * 5000})
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"


# ---- interleaving, cancellation, limits ----

def stream_in_thread(server, body, out, key):
    def run():
        events, stamps = [], []
        for event in server.stream("/v1/completions", body):
            events.append(event)
            stamps.append(time.monotonic())
        out[key] = (collect_stream(events), stamps)
    t = threading.Thread(target=run)
    t.start()
    return t


def test_two_interleaved_streams_each_equal_their_solo_output(server, run_cli, store):
    prompts = [PROMPT, "import os\n\ndef list_files(path):"]
    solo = [cli_text(run_cli, store, p, 96, "--raw") for p in prompts]
    out = {}
    threads = [stream_in_thread(server, {"prompt": p, "max_tokens": 96, "stream": True}, out, i)
               for i, p in enumerate(prompts)]
    for t in threads:
        t.join(timeout=300)
    for i in range(2):
        (text, _, _, _), _ = out[i]
        assert text == solo[i], f"stream {i}"
    # Interleaved, not one after the other: each stream got text before the other finished.
    (_, stamps0), (_, stamps1) = out[0], out[1]
    assert stamps0[0] < stamps1[-1] and stamps1[0] < stamps0[-1]


def test_cancel_mid_stream(server):
    events = []
    cancelled = {}
    body = {"prompt": PROMPT, "max_tokens": 400, "stream": True, "request_id": "to-cancel"}
    for event in server.stream("/v1/completions", body):
        events.append(event)
        if len(events) == 3:
            status, _, answer = server.post("/v1/requests/to-cancel/cancel", b"")
            cancelled["status"] = status
            cancelled["body"] = answer
    assert cancelled["status"] == 200 and cancelled["body"]["cancelled"] is True
    text, finish, _, _ = collect_stream(events)
    assert finish == "cancelled"
    # The id is released once the response ended.
    assert server.post("/v1/requests/to-cancel/cancel", b"")[0] == 404


def test_cancel_before_admission_and_capacity(make_server):
    s = make_server("--max-active", "1", "--max-queued", "1")
    out = {}
    first = stream_in_thread(s, {"prompt": PROMPT, "max_tokens": 2000, "stream": True, "request_id": "long"}, out, 0)
    time.sleep(0.5)
    queued = {}

    def queued_request():
        queued["answer"] = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 4, "request_id": "queued"})
    t = threading.Thread(target=queued_request)
    t.start()
    time.sleep(0.5)
    # The queue (1) is full: a third request gets 503.
    status, _, body = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 4})
    assert status == 503 and body["error"]["code"] == "capacity_exhausted"
    assert s.post("/v1/requests/queued/cancel", b"")[0] == 200
    t.join(timeout=60)
    status, _, body = queued["answer"]
    assert status == 499 and body["error"]["type"] == "cancelled"
    assert s.post("/v1/requests/long/cancel", b"")[0] == 200
    first.join(timeout=60)
    assert out[0][0][1] == "cancelled"
    assert s.stop() == 0


def test_duplicate_request_ids(make_server):
    s = make_server("--max-active", "1")
    out = {}
    first = stream_in_thread(s, {"prompt": PROMPT, "max_tokens": 2000, "stream": True, "request_id": "dup"}, out, 0)
    time.sleep(0.5)
    status, _, body = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "request_id": "dup"})
    assert status == 409 and body["error"]["param"] == "request_id"
    s.post("/v1/requests/dup/cancel", b"")
    first.join(timeout=60)
    assert s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 2, "request_id": "dup"})[0] == 200


def test_a_request_that_cannot_fit_alone_gets_503(make_server):
    s = make_server("--state-memory-gb", "0.000001")
    status, _, body = s.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 8})
    assert status == 503 and body["error"]["code"] == "insufficient_memory"


def test_client_disconnect_mid_stream_cancels_and_the_server_keeps_serving(server):
    body = json.dumps({"prompt": PROMPT, "max_tokens": 3000, "stream": True, "request_id": "gone"}).encode()
    head = (f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection((server.host, server.port), timeout=30) as sock:
        sock.sendall(head + body)
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    # The write that finds the socket closed cancels the request and releases its id.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if server.post("/v1/requests/gone/cancel", b"")[0] == 404:
            break
        time.sleep(0.2)
    else:
        raise AssertionError("the disconnected request was never released")
    status, _, answer = server.post("/v1/completions", {"prompt": PROMPT, "max_tokens": 2})
    assert status == 200 and answer["choices"][0]["text"]


def test_sigterm_cancels_in_flight_requests_and_exits_zero(make_server):
    s = make_server()
    out = {}
    t = stream_in_thread(s, {"prompt": PROMPT, "max_tokens": 3000, "stream": True}, out, 0)
    time.sleep(1.0)
    assert s.stop() == 0, s.stderr()
    t.join(timeout=30)
    assert out[0][0][1] == "cancelled"


def test_paced_prefill_keeps_the_text(make_server, run_cli, store):
    # A long prompt prefilled beside another request runs in paced chunks (min(128, quantum),
    # then adapted); its greedy text is still the CLI's.
    long_prompt = (MODEL / "heldout_sample.txt").read_text()[:3000]
    solo = cli_text(run_cli, store, long_prompt, 32, "--raw")
    s = make_server("--prefill-chunk-seconds", "0.01")
    out = {}
    other = stream_in_thread(s, {"prompt": PROMPT, "max_tokens": 300, "stream": True}, out, "other")
    time.sleep(0.2)
    status, _, body = s.post("/v1/completions", {"prompt": long_prompt, "max_tokens": 32})
    other.join(timeout=120)
    assert status == 200
    assert body["choices"][0]["text"] == solo
    assert body["timings"]["prefill_chunks"] > 1
