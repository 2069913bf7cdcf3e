"""A fake model provider on 127.0.0.1 for the SDK tests and the examples: it answers each request with
the next scripted SSE turn, and refuses (400, in the provider's error shape) a request whose history is
not valid for the provider, so an SDK sending back a wrong history fails the test.
"""

from __future__ import annotations

import json
import pathlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "tests" / "fixtures"

# The recorded-shape turns: the seed's complete write of notes.txt (call u1), then a plain text answer.
WRITE_TURN = {
    "anthropic": FIXTURES / "seed" / "anthropic_complete.sse",
    "openai-responses": FIXTURES / "seed" / "openai-responses_complete.sse",
}
FINAL_TEXT = "The notes are updated."


def sse(events: list[tuple[str, dict]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def anthropic_text_turn(text: str) -> bytes:
    """A text-only Messages turn in the shape the API streams it."""
    message = {
        "id": "msg_fake_2", "type": "message", "role": "assistant", "model": "fake", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 1},
    }
    return sse([
        ("message_start", {"type": "message_start", "message": message}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 5}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def responses_text_turn(text: str) -> bytes:
    """A text-only Responses turn in the shape the API streams it."""
    part = {"type": "output_text", "text": text, "annotations": []}
    item = {"type": "message", "id": "msg_fake_2", "role": "assistant", "status": "completed", "content": [part]}
    response = {"id": "resp_fake_2", "object": "response", "status": "in_progress", "output": []}
    done = dict(response, status="completed", output=[item])
    n = iter(range(100))
    return sse([
        ("response.created", {"type": "response.created", "sequence_number": next(n), "response": response}),
        ("response.output_item.added", {"type": "response.output_item.added", "sequence_number": next(n), "output_index": 0, "item": dict(item, status="in_progress", content=[])}),
        ("response.content_part.added", {"type": "response.content_part.added", "sequence_number": next(n), "item_id": "msg_fake_2", "output_index": 0, "content_index": 0, "part": dict(part, text="")}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "sequence_number": next(n), "item_id": "msg_fake_2", "output_index": 0, "content_index": 0, "delta": text}),
        ("response.output_text.done", {"type": "response.output_text.done", "sequence_number": next(n), "item_id": "msg_fake_2", "output_index": 0, "content_index": 0, "text": text}),
        ("response.content_part.done", {"type": "response.content_part.done", "sequence_number": next(n), "item_id": "msg_fake_2", "output_index": 0, "content_index": 0, "part": part}),
        ("response.output_item.done", {"type": "response.output_item.done", "sequence_number": next(n), "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "sequence_number": next(n), "response": done}),
    ])


def anthropic_history_error(body: dict) -> str | None:
    """What the Messages API would refuse in `messages`: every tool_use answered by a tool_result with
    its ID at the start of the next user message, no tool_result without its tool_use."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return "messages must be a non-empty list"
    for i, message in enumerate(messages):
        if message.get("role") not in ("user", "assistant"):
            return f"messages[{i}].role must be user or assistant"
        if i > 0 and messages[i - 1].get("role") == message["role"]:
            return f"messages[{i}]: roles must alternate"
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        if message["role"] != "assistant":
            continue
        uses = [b for b in blocks if b.get("type") == "tool_use"]
        for use in uses:
            if not isinstance(use.get("id"), str) or not isinstance(use.get("input"), dict):
                return f"messages[{i}]: tool_use needs an id and an object input"
        if not uses:
            continue
        if i + 1 >= len(messages):
            return f"messages[{i}]: tool_use ids without tool_result blocks after them"
        answer = messages[i + 1].get("content")
        results = [b for b in answer if b.get("type") == "tool_result"] if isinstance(answer, list) else []
        if [b.get("tool_use_id") for b in results] != [u["id"] for u in uses]:
            return f"messages[{i + 1}]: tool_result ids must answer the tool_use ids {[u['id'] for u in uses]}"
        if answer[: len(results)] != results:
            return f"messages[{i + 1}]: tool_result blocks must come first"
    for i, message in enumerate(messages):
        content = message.get("content")
        if message["role"] == "user" and isinstance(content, list):
            for block in content:
                if block.get("type") == "tool_result":
                    previous = messages[i - 1].get("content") if i > 0 else None
                    ids = [b.get("id") for b in previous if b.get("type") == "tool_use"] if isinstance(previous, list) else []
                    if block.get("tool_use_id") not in ids:
                        return f"messages[{i}]: tool_result for an unknown tool_use"
    return None


def responses_history_error(body: dict) -> str | None:
    """What the Responses API would refuse in `input`: every function_call answered by one
    function_call_output with its call_id and a string output, and no output without its call."""
    items = body.get("input")
    if isinstance(items, str):
        return None
    if not isinstance(items, list) or not items:
        return "input must be a string or a non-empty list"
    calls = [it.get("call_id") for it in items if it.get("type") == "function_call"]
    outputs = [it for it in items if it.get("type") == "function_call_output"]
    for item in items:
        if item.get("type") == "function_call" and not all(isinstance(item.get(k), str) for k in ("call_id", "name", "arguments")):
            return "a function_call needs call_id, name and arguments as strings"
    for output in outputs:
        if not isinstance(output.get("output"), str):
            return "function_call_output.output must be a string"
        if output.get("call_id") not in calls:
            return f"function_call_output for an unknown call {output.get('call_id')!r}"
    answered = [o.get("call_id") for o in outputs]
    if sorted(answered) != sorted(calls):
        return f"function calls {calls} not each answered once (answers: {answered})"
    return None


CHECKS = {"anthropic": anthropic_history_error, "openai-responses": responses_history_error}


class FakeProvider:
    """Serves `turns` (SSE bodies) one per request, in order, after checking each request's history."""

    def __init__(self, provider: str, turns: list[bytes] | None = None, drop_at: int | None = None):
        """``drop_at``: the first turn is cut after that many bytes, the connection closed mid-body
        (its content-length promised the whole turn), as a dropped connection would leave it."""
        self.provider = provider
        self.drop_at = drop_at
        if turns is None:
            final = anthropic_text_turn if provider == "anthropic" else responses_text_turn
            turns = [WRITE_TURN[provider].read_bytes(), final(FINAL_TEXT)]
        self.turns = list(turns)
        self.requests: list[dict] = []
        self.refusals: list[str] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                fake.requests.append(body)
                problem = CHECKS[fake.provider](body)
                if problem is None and not fake.turns:
                    problem = "no more scripted turns"
                if problem is not None:
                    fake.refusals.append(problem)
                    error = json.dumps({"type": "error", "error": {"type": "invalid_request_error", "message": problem}}).encode()
                    self.send_response(400)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(error)))
                    self.end_headers()
                    self.wfile.write(error)
                    return
                turn = fake.turns.pop(0)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("content-length", str(len(turn)))
                self.end_headers()
                if fake.drop_at is not None:
                    self.wfile.write(turn[: fake.drop_at])
                    self.wfile.flush()
                    fake.drop_at = None
                    self.close_connection = True
                    return
                self.wfile.write(turn)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}" + ("/v1" if self.provider == "openai-responses" else "")

    def __enter__(self) -> FakeProvider:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

