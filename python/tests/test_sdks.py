"""The official SDKs, pinned (requirements.txt), streaming from a fake provider on loopback: the SDK's
raw bytes go to turngate, and the history turngate returns is sent back in the SDK's next request,
where the fake provider checks its shape as the real API would."""

import asyncio

import anthropic
import openai
import turngate

from conftest import WRITTEN
from fake_provider import (
    FINAL_TEXT,
    WRITE_TURN,
    FakeProvider,
    anthropic_history_error,
    responses_history_error,
)


def test_anthropic_sdk_bytes_in_history_back(root):
    toolbox = turngate.Toolbox(root)
    with FakeProvider("anthropic") as fake:
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test", max_retries=0)
        messages = [{"role": "user", "content": "Update the notes."}]
        texts = []
        for _ in range(2):
            with client.messages.with_streaming_response.create(
                model="fake", max_tokens=1024, messages=messages, stream=True,
                tools=toolbox.tool_definitions("anthropic"),
            ) as response:
                report = toolbox.run_turn("anthropic", response.iter_bytes(), on_text=texts.append)
            assert report["turn"]["status"] == "completed"
            messages += report["history"]
    assert fake.refusals == [] and len(fake.requests) == 2
    assert (root / "notes.txt").read_text() == WRITTEN
    sent = fake.requests[1]["messages"]
    assert [b["type"] for b in sent[1]["content"]] == ["text", "tool_use"]
    assert sent[2]["content"][0]["tool_use_id"] == "u1"
    assert "".join(texts).endswith(FINAL_TEXT)
    assert {t["name"] for t in fake.requests[0]["tools"]} >= {"write_file", "read_file"}


def test_openai_sdk_responses_bytes_in_history_back(root):
    toolbox = turngate.Toolbox(root)
    with FakeProvider("openai-responses") as fake:
        client = openai.OpenAI(base_url=fake.base_url, api_key="test", max_retries=0)
        items = [{"role": "user", "content": "Update the notes."}]
        for _ in range(2):
            with client.responses.with_streaming_response.create(
                model="fake", input=items, stream=True, store=False,
                tools=toolbox.tool_definitions("openai-responses"),
            ) as response:
                report = toolbox.run_turn("openai-responses", response.iter_bytes())
            assert report["turn"]["status"] == "completed"
            items += report["history"]
    assert fake.refusals == [] and len(fake.requests) == 2
    assert (root / "notes.txt").read_text() == WRITTEN
    sent = fake.requests[1]["input"]
    assert [i.get("type") for i in sent[1:]] == ["message", "function_call", "function_call_output"]
    assert sent[3]["call_id"] == "u1"


def test_async_sdk_chunks_through_arun_turn(root):
    """The async SDK's `iter_bytes()` (an async iterator) fed to `arun_turn`."""

    async def main():
        toolbox = turngate.Toolbox(root)
        with FakeProvider("anthropic") as fake:
            client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test", max_retries=0)
            async with client.messages.with_streaming_response.create(
                model="fake", max_tokens=1024, stream=True,
                messages=[{"role": "user", "content": "Update the notes."}],
            ) as response:
                return await toolbox.arun_turn("anthropic", response.iter_bytes())

    report = asyncio.run(main())
    assert report["calls"][0]["status"] == "ok"
    assert (root / "notes.txt").read_text() == WRITTEN


def test_the_fake_providers_check_refuses_a_history_without_its_answers():
    """The shape check the SDK tests rely on does refuse a wrong history."""
    use = {"type": "tool_use", "id": "u1", "name": "write_file", "input": {}}
    unanswered = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": [use]}]
    assert anthropic_history_error({"messages": unanswered})
    wrong_id = unanswered + [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u2", "content": "x"}]}]
    assert anthropic_history_error({"messages": wrong_id})
    call = {"type": "function_call", "call_id": "u1", "name": "write_file", "arguments": "{}"}
    assert responses_history_error({"input": [{"role": "user", "content": "hi"}, call]})
    assert responses_history_error({"input": [call, {"type": "function_call_output", "call_id": "u1", "output": {"x": 1}}]})


def test_a_connection_dropped_mid_turn_is_an_incomplete_report(root):
    """The SDK's connection drops half way through the write turn: no exception escapes `run_turn` or
    `arun_turn`; the turn is `incomplete`, its call answered `not_run`, nothing written, and the
    HTTP client's own error kept as `read_error`."""
    whole = WRITE_TURN["anthropic"].read_bytes()
    cut = whole.index(b"message_delta")  # after the tool input, before the ending
    toolbox = turngate.Toolbox(root)

    def sync_turn(fake):
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test", max_retries=0)
        with client.messages.with_streaming_response.create(
            model="fake", max_tokens=1024, messages=[{"role": "user", "content": "Update."}], stream=True,
            tools=toolbox.tool_definitions("anthropic"),
        ) as response:
            return toolbox.run_turn("anthropic", response.iter_bytes())

    async def async_turn(fake):
        client = anthropic.AsyncAnthropic(base_url=fake.base_url, api_key="test", max_retries=0)
        async with client.messages.with_streaming_response.create(
            model="fake", max_tokens=1024, messages=[{"role": "user", "content": "Update."}], stream=True,
            tools=toolbox.tool_definitions("anthropic"),
        ) as response:
            return await toolbox.arun_turn("anthropic", response.iter_bytes())

    for run in (sync_turn, lambda fake: asyncio.run(async_turn(fake))):
        with FakeProvider("anthropic", drop_at=cut) as fake:
            report = run(fake)
        assert report["turn"]["status"] == "incomplete", report["turn"]
        assert [(c["id"], c["status"]) for c in report["calls"]] == [("u1", "not_run")]
        assert report["history"] == []
        error = report["read_error"]
        assert isinstance(error, Exception) and not isinstance(error, turngate.TurngateError), error
        assert type(error).__module__.split(".")[0].startswith("httpx"), type(error)
        assert (root / "notes.txt").read_text() != WRITTEN
    assert toolbox.journal() == []
