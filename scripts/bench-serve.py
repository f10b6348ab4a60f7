#!/usr/bin/env python3
"""Aggregate generation throughput of `strata serve` with 1, 2, 4, 8 concurrent streams.
Usage: bench-serve.py STRATA_BINARY MODEL.gguf [tokens per stream] [rounds] [temperature]. Requests are
greedy unless a temperature is given (then they sample with the server's other defaults). Each round measures every
stream count once, in turn, so slow phases of a noisy machine hit all of them alike; the table
gives the median over rounds. Prints a table and JSON."""
import concurrent.futures as cf
import json
import re
import subprocess
import sys
import threading
import time
import urllib.request

strata, model = sys.argv[1], sys.argv[2]
n_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 64
rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 3
temperature = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
proc = subprocess.Popen([strata, "serve", "-m", model, "--port", "0", "--parallel", "8", "--ctx", "1024"],
                        stderr=subprocess.PIPE, text=True)
port = int(re.search(r":(\d+)/", proc.stderr.readline()).group(1))
threading.Thread(target=proc.stderr.read, daemon=True).start()
base = f"http://127.0.0.1:{port}"
while True:
    try:
        if urllib.request.urlopen(base + "/health").status == 200:
            break
    except Exception:
        time.sleep(0.2)


def one(i):
    body = json.dumps({"prompt": f"Story {i}: Once upon a time,", "max_tokens": n_tokens, "temperature": temperature,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request(base + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.loads(r.read())["usage"]["completion_tokens"]


one(0)  # warm-up
levels = (1, 2, 4, 8)
samples = {n: [] for n in levels}
for _ in range(rounds):
    for streams in levels:
        t0 = time.time()
        with cf.ThreadPoolExecutor(streams) as ex:
            tokens = sum(ex.map(one, range(streams)))
        samples[streams].append(tokens / (time.time() - t0))
results = {n: sorted(v)[len(v) // 2] for n, v in samples.items()}
for streams in levels:
    print(f"| {streams} streams | {streams * n_tokens} tokens each round | {results[streams]:7.2f} tok/s aggregate "
          f"(median of {rounds}) | {results[streams] / results[1]:4.2f}x |")
proc.terminate()
print(json.dumps({"model": model, "tokens_per_stream": n_tokens, "rounds": rounds, "temperature": temperature,
                  "aggregate_tokens_per_s": results,
                  "samples": samples}))
