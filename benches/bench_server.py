"""`cortex serve` under load, beside the Python API in the same run.

1. Overhead: the same hybrid searches, one at a time, alternately through the Python API
   (an Engine in this process) and over HTTP (``cortex serve`` in its own process, one
   keep-alive connection): p50 of each and the difference, the server's cost per search.
2. Load: 16 clients (threads, one keep-alive connection each) for ``--seconds``, 80 %
   searches and 20 % adds: requests/s, p50/p99 of each, every error, and afterwards
   whether every add the server acknowledged (201) is found by its unique word.
3. The same 16 threads on the Python API directly, searches only, for the throughput
   the server is measured against.

    python benches/bench_server.py                      # 60 s each, 2,000 memories
    python benches/bench_server.py --seconds 10 --json

Both sides record their searches (the server always does; the API is told to), so both
write the recall log. The server runs with ``--rate-limit off``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cortex

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.procs
from tests.procs import cortex_command, free_port, wait_until_serving
from tests.words import OPS_WORDS, SEARCH_WORDS

WORDS = [*OPS_WORDS, *SEARCH_WORDS, "snapshot", "backup", "region", "replica", "schema"]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 20))) + "."


def query(rng: random.Random) -> str:
    return " ".join(rng.sample(WORDS, rng.randint(2, 3)))


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _NoDelay(http.client.HTTPConnection):
    """http.client sends a request's headers and body in two writes; with Nagle's
    algorithm on, the body waits for the server's delayed ACK (~20-40 ms on Linux). Real
    clients turn it off (urllib3 and httpx set TCP_NODELAY; browsers too), so do we."""

    def connect(self) -> None:
        super().connect()
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class Client:
    """One keep-alive HTTP connection to the server."""

    def __init__(self, port: int) -> None:
        self.conn = _NoDelay("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        headers = {"content-type": "application/json"} if data is not None else {}
        self.conn.request(method, path, body=data, headers=headers)
        response = self.conn.getresponse()
        return response.status, json.loads(response.read())


@dataclass
class Tally:
    search_ms: list[float] = field(default_factory=list)
    add_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    added: list[tuple[int, str]] = field(default_factory=list)  # (id, unique word)


def http_load(port: int, clients: int, seconds: float, seed: int) -> tuple[Tally, float]:
    tallies = [Tally() for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def run(n: int) -> None:
        rng = random.Random(seed + n)
        client = Client(port)
        tally = tallies[n]
        start.wait()
        while time.perf_counter() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                if rng.random() < 0.2:
                    word = "bench" + uuid.uuid4().hex[:12]
                    status, data = client.call(
                        "POST", "/api/memories", {"content": f"{sentence(rng)} {word}"}
                    )
                    if status == 201:
                        tally.added.append((data["id"], word))
                        tally.add_ms.append((time.perf_counter() - t0) * 1000)
                    else:
                        tally.errors.append(f"add {status}: {data}")
                else:
                    status, data = client.call(
                        "POST",
                        "/api/memories/search",
                        {"query": query(rng), "pagination": {"limit": 10}},
                    )
                    if status == 200:
                        tally.search_ms.append((time.perf_counter() - t0) * 1000)
                    else:
                        tally.errors.append(f"search {status}: {data}")
            except Exception as exc:  # every failure is counted, none stops the run
                tally.errors.append(f"{type(exc).__name__}: {exc}")
                client = Client(port)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + seconds
    began = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - began
    total = Tally()
    for one in tallies:
        total.search_ms += one.search_ms
        total.add_ms += one.add_ms
        total.errors += one.errors
        total.added += one.added
    return total, elapsed


def api_load(engine: cortex.Engine, clients: int, seconds: float, seed: int) -> tuple[Tally, float]:
    tallies = [Tally() for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    stop_at = [0.0]
    opts = cortex.Options(limit=10, recorded_as="bench:api")

    def run(n: int) -> None:
        rng = random.Random(seed + 1000 + n)
        start.wait()
        while time.perf_counter() < stop_at[0]:
            t0 = time.perf_counter()
            try:
                engine.search(query(rng), opts)
                tallies[n].search_ms.append((time.perf_counter() - t0) * 1000)
            except Exception as exc:
                tallies[n].errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    for t in threads:
        t.start()
    stop_at[0] = time.perf_counter() + seconds
    began = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    total = Tally()
    for one in tallies:
        total.search_ms += one.search_ms
        total.errors += one.errors
    return total, time.perf_counter() - began


class _Timed:
    """The Engine, with the time of each `search` call noted (the server's own calls)."""

    def __init__(self, engine: cortex.Engine) -> None:
        self._engine = engine
        self.spent: list[float] = []

    def search(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self._engine.search(*args, **kwargs)
        finally:
            self.spent.append(time.perf_counter() - t0)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine, name)


def overhead(engine: cortex.Engine, n: int, seed: int) -> dict[str, Any]:
    """What the HTTP layer adds to one search: the round trip of each request minus the
    time the server spent in ``Engine.search`` and in recording that search, request by
    request (one client, one at a time). The server runs in this process (uvicorn on a
    thread) so its Engine calls can be timed; the client is ``http.client`` on loopback.

    The two p50s of a search through the API and over HTTP are printed too, but on a
    shared machine their difference drifts by more than the overhead itself."""
    import uvicorn

    from cortex.server import create_app

    timed = _Timed(engine)
    cache = getattr(engine, "query_cache", None)

    def forget() -> None:
        if cache is not None:
            cache.clear()

    def settle() -> None:  # searches record on a writer thread: wait for it, untimed
        flush = getattr(engine, "flush_recalls", None)
        if flush is not None:
            flush()

    app = create_app(timed, rate_limit=None)  # type: ignore[arg-type]
    server_state = app.state.server
    recorded: list[float] = []
    record = server_state._record

    def timed_record(*args: Any, **kwargs: Any) -> None:
        t0 = time.perf_counter()
        try:
            record(*args, **kwargs)
        finally:
            recorded.append(time.perf_counter() - t0)

    server_state._record = timed_record
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    out: dict[str, Any] = {"searches": n}
    try:
        for mode in ("keyword", "hybrid"):
            rng = random.Random(seed)
            client = Client(port)
            api_ms, http_ms, layer_ms, api_cpu, http_cpu = [], [], [], [], []
            opts = cortex.Options(limit=10, recorded_as="bench:api", mode=cortex.Mode(mode))
            for i in range(n + 10):
                q = query(rng)
                forget()  # both sides embed the query (else the second would reuse it)
                c0, t0 = time.process_time(), time.perf_counter()
                engine.search(q, opts)
                c1, t1 = time.process_time(), time.perf_counter()
                settle()  # its recall rows written before the HTTP side is timed
                timed.spent.clear()
                recorded.clear()
                forget()
                c1, t1 = time.process_time(), time.perf_counter()
                status, _ = client.call(
                    "POST",
                    "/api/memories/search",
                    {"query": q, "mode": mode, "pagination": {"limit": 10}},
                )
                c2, t2 = time.process_time(), time.perf_counter()
                assert status == 200
                settle()
                if i >= 10:  # warm-up done
                    api_ms.append((t1 - t0) * 1000)
                    http_ms.append((t2 - t1) * 1000)
                    inside = sum(timed.spent) + sum(recorded)
                    layer_ms.append((t2 - t1 - inside) * 1000)
                    api_cpu.append((c1 - c0) * 1000)
                    http_cpu.append((c2 - c1) * 1000)
            out[mode] = {
                "api_p50_ms": round(statistics.median(api_ms), 2),
                "http_p50_ms": round(statistics.median(http_ms), 2),
                "overhead_p50_ms": round(statistics.median(layer_ms), 2),
                "overhead_p99_ms": round(pct(layer_ms, 0.99), 2),
                # CPU time of the whole process (client, server, engine), which a shared
                # machine's other tenants do not inflate as they do wall time
                "api_cpu_p50_ms": round(statistics.median(api_cpu), 2),
                "http_cpu_p50_ms": round(statistics.median(http_cpu), 2),
                "overhead_cpu_ms": round(
                    statistics.median(http_cpu) - statistics.median(api_cpu), 2
                ),
            }
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    return out


def summary(tally: Tally, elapsed: float) -> dict[str, Any]:
    requests = len(tally.search_ms) + len(tally.add_ms)
    out: dict[str, Any] = {
        "seconds": round(elapsed, 1),
        "requests": requests,
        "requests_per_s": round(requests / elapsed, 1),
        "searches_per_s": round(len(tally.search_ms) / elapsed, 1),
        "search_p50_ms": round(pct(tally.search_ms, 0.5), 1),
        "search_p99_ms": round(pct(tally.search_ms, 0.99), 1),
        "errors": len(tally.errors),
        "first_errors": tally.errors[:3],
    }
    if tally.add_ms:
        out["adds"] = len(tally.add_ms)
        out["add_p50_ms"] = round(pct(tally.add_ms, 0.5), 1)
        out["add_p99_ms"] = round(pct(tally.add_ms, 0.99), 1)
    out["p99_over_p50"] = round(out["search_p99_ms"] / out["search_p50_ms"], 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--overhead-searches", type=int, default=300)
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        rng = random.Random(args.seed)
        with cortex.open(db) as engine:
            engine.add_many([{"content": sentence(rng)} for _ in range(args.memories)])
        port = free_port()
        log = (Path(tmp) / "serve.log").open("w")
        serve = ["serve", "--port", str(port), "--rate-limit", "off"]
        server = subprocess.Popen(
            [*cortex_command(), "--db", str(db), *serve],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            try:
                wait_until_serving(server, f"http://127.0.0.1:{port}/api/health")
            except RuntimeError as exc:
                raise SystemExit(f"cortex serve did not start: {exc}") from None
            with cortex.open(db) as engine:
                engine.search("warm up", cortex.Options(record=False))
                over = overhead(engine, args.overhead_searches, args.seed)
                http_tally, http_s = http_load(port, args.clients, args.seconds, args.seed)
                api_tally, api_s = api_load(engine, args.clients, args.seconds, args.seed)
                missing = [
                    memory_id
                    for memory_id, word in http_tally.added
                    if memory_id
                    not in {
                        r.memory.id
                        for r in engine.search(word, mode="keyword", record=False, limit=5)
                    }
                ]
        finally:
            server.terminate()
            server.wait(timeout=60)
            log.close()

    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.python_version()}",
        "memories": args.memories,
        "clients": args.clients,
        "overhead": over,
        "http_load": {**summary(http_tally, http_s), "adds_missing": len(missing)},
        "api_load": summary(api_tally, api_s),
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    h, a = result["http_load"], result["api_load"]
    print(f"machine: {result['machine']}; {args.memories} memories; {args.clients} clients")
    for mode in ("keyword", "hybrid"):
        o = over[mode]
        print(
            f"one at a time, {mode}: API p50 {o['api_p50_ms']} ms, HTTP p50 {o['http_p50_ms']}"
            f" ms; the HTTP layer's own time p50 {o['overhead_p50_ms']} ms,"
            f" p99 {o['overhead_p99_ms']} ms; CPU per search: API {o['api_cpu_p50_ms']} ms,"
            f" HTTP {o['http_cpu_p50_ms']} ms (+{o['overhead_cpu_ms']} ms)"
        )
    print(
        f"HTTP, {args.clients} clients, {h['seconds']} s: {h['requests_per_s']} req/s "
        f"({h['searches_per_s']} searches/s), search p50 {h['search_p50_ms']} ms p99 "
        f"{h['search_p99_ms']} ms (x{h['p99_over_p50']}), add p50 {h.get('add_p50_ms')} ms, "
        f"errors {h['errors']}, acknowledged adds {h.get('adds', 0)}, missing {h['adds_missing']}"
    )
    print(
        f"API, {args.clients} threads: {a['searches_per_s']} searches/s, p50 {a['search_p50_ms']} "
        f"ms p99 {a['search_p99_ms']} ms, errors {a['errors']}"
    )
    return 1 if h["errors"] or h["adds_missing"] or a["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
