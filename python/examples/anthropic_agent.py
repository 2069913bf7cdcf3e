"""An agent loop with the official `anthropic` SDK: every streamed turn goes through turngate's gate,
approved calls run sandboxed in ROOT, and the history turngate returns is the next request's messages.

    ANTHROPIC_API_KEY=... python anthropic_agent.py ROOT "Put today's plan in notes.txt"

(`ANTHROPIC_BASE_URL` points the SDK at another endpoint; the tests use a fake provider.)
"""

import sys

import anthropic
from anthropic.types import MessageParam

import turngate

MODEL = "claude-sonnet-4-5"
POLICY = {"default": "read-only", "tools": {"write_file": {"paths": ["notes.txt"]}}}


def main(root: str, prompt: str) -> int:
    client = anthropic.Anthropic()
    toolbox = turngate.Toolbox(root, policy=POLICY)
    tools = toolbox.tool_definitions("anthropic")
    messages: list[MessageParam] = [{"role": "user", "content": prompt}]
    for _ in range(10):
        with client.messages.with_streaming_response.create(
            model=MODEL, max_tokens=4096, messages=messages, tools=tools, stream=True
        ) as response:
            report = toolbox.run_turn(
                "anthropic",
                response.iter_bytes(),
                max_output_tokens=4096,
                on_text=lambda t: print(t, end="", flush=True),
            )
        turn = report["turn"]
        if turn["status"] != "completed":  # truncated, refused, cut: nothing ran
            print(f"\nturn {turn['status']}: {turn['detail']}", file=sys.stderr)
            return 3
        messages += report["history"]
        for call in report["calls"]:
            print(f"\n[{call['name']} {call['id']}: {call['status']}]", file=sys.stderr)
        if not report["calls"]:
            print()
            return 0
    return 4


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
