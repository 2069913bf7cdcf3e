"""An agent loop with the official `openai` SDK and the Responses API: every streamed turn goes through
turngate's gate, approved calls run sandboxed in ROOT, and the history turngate returns (the output
items and one answer per call) is appended to the next request's input.

    OPENAI_API_KEY=... python openai_agent.py ROOT "Put today's plan in notes.txt"

(`OPENAI_BASE_URL` points the SDK at another endpoint; the tests use a fake provider.)
"""

import sys

import openai
from openai.types.responses import ResponseInputParam

import turngate

MODEL = "gpt-5"
POLICY = {"default": "read-only", "tools": {"write_file": {"paths": ["notes.txt"]}}}


def main(root: str, prompt: str) -> int:
    client = openai.OpenAI()
    toolbox = turngate.Toolbox(root, policy=POLICY)
    tools = toolbox.tool_definitions("openai-responses")
    items: ResponseInputParam = [{"role": "user", "content": prompt}]
    for _ in range(10):
        with client.responses.with_streaming_response.create(
            model=MODEL, input=items, tools=tools, store=False, stream=True
        ) as response:
            report = toolbox.run_turn(
                "openai-responses", response.iter_bytes(), on_text=lambda t: print(t, end="", flush=True)
            )
        turn = report["turn"]
        if turn["status"] != "completed":  # incomplete, refused, cut: nothing ran
            print(f"\nturn {turn['status']}: {turn['detail']}", file=sys.stderr)
            return 3
        items += report["history"]
        for call in report["calls"]:
            print(f"\n[{call['name']} {call['id']}: {call['status']}]", file=sys.stderr)
        if not report["calls"]:
            print()
            return 0
    return 4


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
