"""The Python side of `cargo bench --bench bindings` (host/benches/bindings.rs): answers requests on
stdin, one per line, with the timings of what they name, as one line of JSON (nanoseconds):

* ``noop N``: N calls of the test guest ``noop`` with ``{}``, as an agent platform calls a tool;
* ``turn N``: N runs of the 500-write turn's raw body through ``Toolbox.run_turn``, each on a fresh root
  with a fresh toolbox (made outside the timing).

Set up from the environment: TURNGATE_BENCH_TOOLS (a tools directory holding noop.wasm),
TURNGATE_BENCH_CACHE (the compiled-component cache), TURNGATE_BENCH_TURN (the turn's body),
TURNGATE_BENCH_WORK (where the roots go)."""

import json
import os
import pathlib
import sys
import time

import turngate

TOOLS = os.environ["TURNGATE_BENCH_TOOLS"]
CACHE = os.environ["TURNGATE_BENCH_CACHE"]
BODY = pathlib.Path(os.environ["TURNGATE_BENCH_TURN"]).read_bytes()
WORK = pathlib.Path(os.environ["TURNGATE_BENCH_WORK"])


def toolbox(root: pathlib.Path) -> turngate.Toolbox:
    return turngate.Toolbox(root, tools_dir=TOOLS, cache_dir=CACHE)


def noop(count: int, box: turngate.Toolbox) -> list[int]:
    timings = []
    for _ in range(count):
        start = time.perf_counter_ns()
        outcome = box.call("noop", {})
        timings.append(time.perf_counter_ns() - start)
        assert outcome["status"] == "ok", outcome
    return timings


turns_run = 0


def turn(count: int) -> list[int]:
    global turns_run
    timings = []
    for _ in range(count):
        turns_run += 1
        root = WORK / f"python-turn-{turns_run}"
        root.mkdir()
        box = toolbox(root)
        start = time.perf_counter_ns()
        report = box.run_turn("anthropic", BODY)
        timings.append(time.perf_counter_ns() - start)
        assert all(c["status"] == "ok" for c in report["calls"]) and len(report["calls"]) == 500
    return timings


def main() -> None:
    noop_root = WORK / "python-noop"
    noop_root.mkdir()
    noop_box = toolbox(noop_root)
    noop(50, noop_box)  # warm-up
    print("ready", flush=True)
    for line in sys.stdin:
        case, count = line.split()
        timings = noop(int(count), noop_box) if case == "noop" else turn(int(count))
        print(json.dumps(timings), flush=True)


main()
