"""POST /v1/messages (Anthropic's Messages API) of `cherenkov serve` on the bundled model, through
the official `anthropic` client and raw HTTP: JSON and streaming replies with the same greedy text
and token counts as the OpenAI chat endpoint for the same conversation, stop sequences, a tool
round trip (tool_use and tool_result blocks rendered as the chat endpoint renders tool calls and
tool messages), count_tokens, Anthropic's error shape and refused blocks and fields. Tool calls the
model writes are checked on a scripted backend (tests/serving/anthropic/messages_http_test.cpp):
the bundled model does not write them."""
import json
import urllib.request

import pytest

from serve_harness import Server

CHAT = "Write a Python function that reverses a list."
SYSTEM = "You are a careful Python programmer."


@pytest.fixture(scope="module")
def anthropic_module():
    # The GPU machine has no anthropic package (and no network): those cases skip there.
    return pytest.importorskip("anthropic")


@pytest.fixture(scope="module")
def client(server, anthropic_module):
    return anthropic_module.Anthropic(base_url=server.url, api_key="unused", max_retries=0)


def openai_chat(server, messages, **fields):
    status, _, body = server.post("/v1/chat/completions",
                                  {"model": "cherenkov", "messages": messages, **fields})
    assert status == 200, body
    return body


def text_of(message):
    return "".join(block.text for block in message.content if block.type == "text")


def test_json_equals_the_chat_endpoint(server, client):
    for max_tokens in (12, 96):
        m = client.messages.create(model="cherenkov", max_tokens=max_tokens, system=SYSTEM,
                                   messages=[{"role": "user", "content": CHAT}])
        o = openai_chat(server, [{"role": "system", "content": SYSTEM},
                                 {"role": "user", "content": CHAT}], max_tokens=max_tokens)
        assert m.type == "message" and m.role == "assistant" and m.model == "cherenkov"
        assert m.id.startswith("msg_")
        assert text_of(m) == o["choices"][0]["message"]["content"]
        expected = {"length": "max_tokens", "stop": "end_turn"}[o["choices"][0]["finish_reason"]]
        assert m.stop_reason == expected and m.stop_sequence is None
        assert m.usage.output_tokens == o["usage"]["completion_tokens"]
        assert m.usage.input_tokens + m.usage.cache_read_input_tokens == o["usage"]["prompt_tokens"]


def test_text_blocks_equal_their_joined_text(server, client):
    blocks = [{"type": "text", "text": "Write a Python function "},
              {"type": "text", "text": "that sorts a list."}]
    m = client.messages.create(model="cherenkov", max_tokens=24,
                               system=[{"type": "text", "text": SYSTEM}],
                               messages=[{"role": "user", "content": blocks}])
    o = openai_chat(server, [{"role": "system", "content": SYSTEM},
                             {"role": "user", "content": "".join(b["text"] for b in blocks)}],
                    max_tokens=24)
    assert text_of(m) == o["choices"][0]["message"]["content"]


def test_stream_with_the_client(client):
    kwargs = dict(model="cherenkov", max_tokens=40, messages=[{"role": "user", "content": CHAT}])
    whole = client.messages.create(**kwargs)
    events = []
    with client.messages.stream(**kwargs) as stream:
        for event in stream:
            events.append(event.type)
        final = stream.get_final_message()
    assert text_of(final) == text_of(whole)
    assert final.stop_reason == whole.stop_reason
    assert final.usage.output_tokens == whole.usage.output_tokens
    # The prompt was computed for the first request: the stream restored it from the prefix cache.
    assert final.usage.input_tokens + final.usage.cache_read_input_tokens == \
        whole.usage.input_tokens + whole.usage.cache_read_input_tokens
    assert final.usage.cache_read_input_tokens > 0
    assert events[0] == "message_start" and events[-1] == "message_stop"
    assert "content_block_start" in events and "content_block_stop" in events
    assert events.index("message_delta") == len(events) - 2


def test_raw_stream_has_named_events_and_a_ping(server):
    body = json.dumps({"model": "cherenkov", "max_tokens": 8, "stream": True,
                       "messages": [{"role": "user", "content": CHAT}]}).encode()
    req = urllib.request.Request(server.url + "/v1/messages", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "x-api-key": "k",
                                          "anthropic-version": "2023-06-01"})
    with urllib.request.urlopen(req, timeout=120) as resp:
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert resp.headers["X-Request-ID"]
        raw = resp.read().decode()
    names = [line[len("event: "):] for line in raw.split("\n") if line.startswith("event: ")]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert "[DONE]" not in raw


def test_stop_sequences(client):
    kwargs = dict(model="cherenkov", max_tokens=64, messages=[{"role": "user", "content": CHAT}])
    full = text_of(client.messages.create(**kwargs))
    assert len(full) > 20, full
    stop = full[10:14]
    cut = full[:full.index(stop)]
    m = client.messages.create(stop_sequences=["never-there", stop], **kwargs)
    assert text_of(m) == cut
    assert m.stop_reason == "stop_sequence" and m.stop_sequence == stop
    with client.messages.stream(stop_sequences=[stop], **kwargs) as stream:
        streamed = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert streamed == cut
    assert final.stop_reason == "stop_sequence" and final.stop_sequence == stop


def test_count_tokens_equals_the_prompt(server, client):
    messages = [{"role": "user", "content": CHAT}]
    counted = client.messages.count_tokens(model="cherenkov", system=SYSTEM, messages=messages)
    o = openai_chat(server, [{"role": "system", "content": SYSTEM}] + messages, max_tokens=1)
    assert counted.input_tokens == o["usage"]["prompt_tokens"]


def test_tool_round_trip_equals_the_chat_endpoint(cherenkov_bin, coder_store, anthropic_module):
    s = Server(cherenkov_bin, coder_store)
    try:
        client = anthropic_module.Anthropic(base_url=s.url, api_key="unused", max_retries=0)
        tools = [{"name": "get_weather", "description": "The weather in a city.",
                  "input_schema": {"type": "object", "properties": {
                      "city": {"type": "string"}, "days": {"type": "integer"}}}}]
        m = client.messages.create(
            model="cherenkov", max_tokens=32, tools=tools, tool_choice={"type": "auto"},
            messages=[
                {"role": "user", "content": "What is the weather in Paris?"},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Let me check."},
                    {"type": "tool_use", "id": "toolu_01", "name": "get_weather",
                     "input": {"city": "Paris", "days": 3}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_01", "content": "21 C and sunny"}]}])
        openai_tools = [{"type": "function", "function": {
            "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
            for t in tools]
        o = openai_chat(s, [
            {"role": "user", "content": "What is the weather in Paris?"},
            {"role": "assistant", "content": "Let me check.",
             "tool_calls": [{"id": "toolu_01", "type": "function", "function": {
                 "name": "get_weather", "arguments": json.dumps({"city": "Paris", "days": 3})}}]},
            {"role": "tool", "tool_call_id": "toolu_01", "content": "21 C and sunny"}],
            max_tokens=32, tools=openai_tools)
        assert m.usage.input_tokens + m.usage.cache_read_input_tokens == o["usage"]["prompt_tokens"]
        message = o["choices"][0]["message"]
        assert text_of(m) == (message["content"] or "")
        assert [b.name for b in m.content if b.type == "tool_use"] == \
            [c["function"]["name"] for c in message.get("tool_calls") or []]
        # The rendered tools count: without them the prompt is shorter.
        bare = client.messages.count_tokens(model="cherenkov",
                                            messages=[{"role": "user", "content": "hi"}])
        with_tools = client.messages.count_tokens(model="cherenkov", tools=tools,
                                                  messages=[{"role": "user", "content": "hi"}])
        assert with_tools.input_tokens > bare.input_tokens
    finally:
        assert s.stop() == 0, s.stderr()
        s.close()


def test_errors_have_anthropics_shape(server, client, anthropic_module):
    status, _, body = server.post("/v1/messages", {"model": "cherenkov",
                                                   "messages": [{"role": "user", "content": "hi"}]})
    assert status == 400
    assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in body["error"]["message"]
    status, _, body = server.post("/v1/messages", "{not json")
    assert status == 400 and body["type"] == "error"
    status, _, body = server.post("/v1/messages/unknown", {})
    assert status == 404 and body["error"]["type"] == "not_found_error"
    status, _, body = server.post("/v1/messages", {
        "model": "cherenkov", "max_tokens": 100000, "messages": [{"role": "user", "content": "hi"}]})
    assert status == 400 and "max_tokens" in body["error"]["message"]
    with pytest.raises(anthropic_module.BadRequestError) as info:
        client.messages.create(model="cherenkov", max_tokens=8, extra_body={"temperature": 1.5},
                               messages=[{"role": "user", "content": "hi"}])
    assert info.value.status_code == 400
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert "temperature" in info.value.body["error"]["message"]


@pytest.mark.parametrize("fields, named", [
    ({"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}]},
     "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "x"}}]}]},
     "messages[0].content[0].type"),
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
    ({"tools": [{"type": "web_search_20250305", "name": "web_search"}]}, "tools[0].type"),
    ({"tools": [{"name": "f", "input_schema": {"type": "object"}}], "tool_choice": {"type": "any"}},
     "tool_choice.type"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure,"}]},
     "messages[1]"),
    ({"frequency_penalty": 0.5}, "frequency_penalty"),
])
def test_refused_blocks_and_fields_name_them(client, anthropic_module, fields, named):
    kwargs = {"model": "cherenkov", "max_tokens": 8,
              "messages": [{"role": "user", "content": "hi"}]}
    extra = {k: v for k, v in fields.items() if k not in kwargs}
    kwargs.update({k: v for k, v in fields.items() if k in kwargs})
    with pytest.raises(anthropic_module.BadRequestError) as info:
        client.messages.create(**kwargs, extra_body=extra)
    error = info.value.body
    assert error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert error["error"]["message"].startswith(named), error


def test_thinking_disabled_and_ignored_fields_are_accepted(client):
    m = client.messages.create(model="cherenkov", max_tokens=4,
                               messages=[{"role": "user", "content": "hi"}],
                               metadata={"user_id": "someone"}, service_tier="auto",
                               extra_body={"thinking": {"type": "disabled"}})
    assert m.usage.output_tokens == 4
