#!/usr/bin/env python3
"""End-to-end tests of `strata serve` with real clients: the openai and anthropic Python
packages, curl for raw SSE framing, raw sockets for disconnects and bad input.
Usage: server_e2e.py STRATA_BINARY MODEL.gguf. Exit 77 (ctest: skipped) without the clients."""
import collections
import concurrent.futures as cf
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

try:
    import anthropic
    import openai
except ImportError as e:
    print(f"SKIP: openai/anthropic Python packages are not installed ({e})")
    sys.exit(77)

STRATA, MODEL = sys.argv[1], sys.argv[2]
passed, failed = 0, 0
SERVERS = []  # the servers running, the latest last


def check(name, cond, detail=""):
    global passed, failed
    if cond:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")
        if SERVERS:
            print("  the server's last log lines:\n" + "".join("    " + line for line in list(SERVERS[-1].log)), flush=True)


class Server:
    def __init__(self, *args, model=None):
        self.proc = subprocess.Popen([STRATA, "serve", "-m", model or MODEL, "--port", "0", "-t", "2", *args],
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()
        m = re.search(r"http://([\d.]+):(\d+)/", line)
        if not m:
            raise RuntimeError("server did not start: " + line + self.proc.stderr.read())
        self.port = int(m.group(2))
        self.base = f"http://127.0.0.1:{self.port}"
        # Drain the server's log, keeping its tail for the report of a failed check.
        self.log = collections.deque(maxlen=40)
        threading.Thread(target=lambda: self.log.extend(self.proc.stderr), daemon=True).start()
        SERVERS.append(self)
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if urllib.request.urlopen(self.base + "/health", timeout=2).status == 200:
                    return
            except Exception:
                time.sleep(0.1)
        raise RuntimeError("server never became healthy")

    def stop(self):
        SERVERS.remove(self)
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def http(base, path, body=None, headers=None, raw=None, method=None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, data=data, headers={"Content-Type": "application/json", **(headers or {})},
                                 method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.read().decode(errors="replace"), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(errors="replace"), dict(e.headers)


def main():
    srv = Server("--parallel", "4", "--ctx", "4096")
    try:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="unused", max_retries=0, timeout=60)
        models = client.models.list()
        check("models list", len(models.data) == 1 and models.data[0].id.endswith(".gguf"))

        msgs = [{"role": "user", "content": "Tell me a story."}]
        r = client.chat.completions.create(model="any", messages=msgs, max_tokens=24, temperature=0)
        text = r.choices[0].message.content
        check("chat completion", len(text) > 0 and r.choices[0].finish_reason == "length", repr(r))
        check("chat usage", r.usage.completion_tokens == 24 and r.usage.prompt_tokens > 0, repr(r.usage))

        chunks = list(client.chat.completions.create(model="any", messages=msgs, max_tokens=24, temperature=0, stream=True,
                                                     stream_options={"include_usage": True}))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        check("chat streaming equals non-streaming (greedy)", streamed == text, f"{streamed!r} vs {text!r}")
        check("stream usage chunk", chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 24)
        check("stream finish_reason", any(c.choices and c.choices[0].finish_reason == "length" for c in chunks))

        r = client.chat.completions.create(model="any", messages=msgs, max_tokens=5, temperature=0, logprobs=True, top_logprobs=3)
        lp = r.choices[0].logprobs.content
        check("chat logprobs", len(lp) == 5 and len(lp[0].top_logprobs) == 3 and lp[0].logprob <= 0
              and abs(lp[0].logprob - lp[0].top_logprobs[0].logprob) < 1e-4, repr(lp[:1]))

        c = client.completions.create(model="any", prompt="Once upon a time", max_tokens=16, temperature=0)
        check("completion", c.choices[0].text.startswith(", there was"), repr(c.choices[0].text))
        c2 = client.completions.create(model="any", prompt=[1, 403, 407, 261, 378], max_tokens=16, temperature=0)
        check("completion from token ids", c2.choices[0].text == c.choices[0].text, repr(c2.choices[0].text))
        cut = text.find(" ", len(text) // 2)
        stop = text[cut:cut + 3]
        r = client.chat.completions.create(model="any", messages=msgs, max_tokens=24, temperature=0, stop=[stop])
        check("stop string", r.choices[0].message.content == text[:text.find(stop)] and r.choices[0].finish_reason == "stop",
              repr((stop, r.choices[0].message.content)))
        s1 = client.completions.create(model="any", prompt="Once", max_tokens=20, temperature=0.9, seed=7).choices[0].text
        s2 = client.completions.create(model="any", prompt="Once", max_tokens=20, temperature=0.9, seed=7).choices[0].text
        check("seeded sampling is repeatable", s1 == s2)

        ac = anthropic.Anthropic(base_url=srv.base, api_key="unused", max_retries=0, timeout=60)
        m = ac.messages.create(model="any", max_tokens=16, messages=[{"role": "user", "content": "Tell me a story."}],
                               extra_body={"temperature": 0})
        check("anthropic message", m.content[0].text == text[:len(m.content[0].text)] and m.stop_reason == "max_tokens",
              repr(m))
        with ac.messages.stream(model="any", max_tokens=16, messages=[{"role": "user", "content": "Tell me a story."}],
                                extra_body={"temperature": 0}) as st:
            atext = "".join(st.text_stream)
            final = st.get_final_message()
        check("anthropic streaming", atext == m.content[0].text and final.usage.output_tokens == 16, repr(atext))

        # Raw SSE framing with curl.
        out = subprocess.run(["curl", "-sN", srv.base + "/v1/chat/completions", "-H", "Content-Type: application/json",
                              "-d", json.dumps({"messages": msgs, "max_tokens": 3, "stream": True})],
                             capture_output=True, text=True, timeout=60).stdout
        events = out.split("\n\n")
        check("SSE framing", out.endswith("data: [DONE]\n\n") and all(e.startswith("data: ") for e in events if e), repr(out[:200]))

        # Concurrency: 8 clients at once each get the answer they get alone (greedy, batched).
        prompts = [f"Story number {i}:" for i in range(8)]
        alone = [client.completions.create(model="any", prompt=p, max_tokens=20, temperature=0).choices[0].text for p in prompts]
        with cf.ThreadPoolExecutor(8) as ex:
            together = list(ex.map(lambda p: client.completions.create(model="any", prompt=p, max_tokens=20,
                                                                        temperature=0).choices[0].text, prompts))
        check("8 concurrent clients get their own greedy answers", together == alone)

        # A client that disconnects mid-stream cancels its generation and frees its sequence.
        before = json.loads(http(srv.base, "/v1/status")[1])["generated_tokens"]
        sock = socket.create_connection(("127.0.0.1", srv.port))
        body = json.dumps({"prompt": "Once", "max_tokens": 4000, "stream": True, "temperature": 0}).encode()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        sock.recv(4096)
        sock.close()
        freed = False
        for _ in range(100):
            st = json.loads(http(srv.base, "/v1/status")[1])
            if st["active"] == 0 and st["kv_bytes_in_use"] == st["kv_bytes_prefix_cache"]:
                freed = True
                break
            time.sleep(0.1)
        generated = st["generated_tokens"] - before
        check("disconnect cancels and frees the slot", freed and generated < 3000, f"{generated} tokens generated; {st!r}")

        # The same for a non-streaming request: the server notices the closed socket through its
        # one-second whitespace heartbeat and cancels.
        before = json.loads(http(srv.base, "/v1/status")[1])["generated_tokens"]
        sock = socket.create_connection(("127.0.0.1", srv.port))
        body = json.dumps({"prompt": "Once", "max_tokens": 4000, "temperature": 0}).encode()
        sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        time.sleep(0.3)
        sock.close()
        freed = False
        for _ in range(100):
            st = json.loads(http(srv.base, "/v1/status")[1])
            if st["active"] == 0 and st["kv_bytes_in_use"] == st["kv_bytes_prefix_cache"]:
                freed = True
                break
            time.sleep(0.1)
        generated = st["generated_tokens"] - before
        check("non-streaming disconnect cancels too", freed and generated < 3000, f"{generated} tokens generated; {st!r}")
        # A non-streaming answer that takes several seconds arrives whole and parses (heartbeat
        # whitespace before the JSON).
        long = client.completions.create(model="any", prompt="Once", max_tokens=1500, temperature=0)
        check("long non-streaming answer parses", long.usage.completion_tokens > 0 and long.choices[0].finish_reason in ("stop", "length"))

        # Prefix reuse: a second conversation with the same long system prompt copies its cells
        # (whole 16-token pages) and answers exactly as a fresh run does.
        system = "You are a storyteller. " * 20
        conv = [{"role": "system", "content": system}, {"role": "user", "content": "A story about a cat."}]
        first = client.chat.completions.create(model="any", messages=conv, max_tokens=12, temperature=0)
        reused0 = json.loads(http(srv.base, "/v1/status")[1])["prefix_reused_tokens"]
        conv2 = [{"role": "system", "content": system}, {"role": "user", "content": "A story about a dog."}]
        second = client.chat.completions.create(model="any", messages=conv2, max_tokens=12, temperature=0)
        reused = json.loads(http(srv.base, "/v1/status")[1])["prefix_reused_tokens"] - reused0
        check("prefix reuse copies whole pages of the shared system prompt", reused >= 64 and reused % 16 == 0, str(reused))
        fresh = Server("--prefix-cache", "0")
        try:
            fc = openai.OpenAI(base_url=fresh.base + "/v1", api_key="unused", max_retries=0, timeout=60)
            alone = fc.chat.completions.create(model="any", messages=conv2, max_tokens=12, temperature=0)
        finally:
            fresh.stop()
        check("prefix reuse gives the same greedy answer", second.choices[0].message.content == alone.choices[0].message.content,
              repr((second.choices[0].message.content, alone.choices[0].message.content)))

        # Malformed requests get 4xx with a message.
        bad = [
            ("bad JSON", b"{not json", 400),
            ("wrong type", json.dumps({"messages": "hi"}).encode(), 400),
            ("negative max_tokens", json.dumps({"messages": msgs, "max_tokens": -5}).encode(), 400),
            ("temperature type", json.dumps({"messages": msgs, "temperature": "hot"}).encode(), 400),
            ("invalid UTF-8", b'{"messages":[{"role":"user","content":"\xff\xfe"}]}', 400),
            ("deep nesting", b'{"messages":' + b"[" * 500 + b"]" * 500 + b"}", 400),
            ("huge body", b'{"messages":[{"role":"user","content":"' + b"a" * (2 << 20) + b'"}]}', 413),
            ("unknown role", json.dumps({"messages": [{"role": "robot", "content": "x"}]}).encode(), 400),
            ("prompt too long", json.dumps({"messages": [{"role": "user", "content": "word " * 5000}]}).encode(), 400),
        ]
        for name, raw, want in bad:
            code, text_, _ = http(srv.base, "/v1/chat/completions", raw=raw)
            ok = code == want and ("error" in text_)
            check(f"malformed: {name} -> {want}", ok, f"{code} {text_[:160]}")
        code, text_, _ = http(srv.base, "/v1/nope", body={})
        check("unknown endpoint -> 404", code == 404)
        code, text_, _ = http(srv.base, "/tokenize", body={"content": "Once upon a time"})
        toks = json.loads(text_)["tokens"]
        code2, text2, _ = http(srv.base, "/detokenize", body={"tokens": toks})
        check("tokenize / detokenize", code == 200 and json.loads(text2)["content"].strip() == "Once upon a time", text2)
        code, text_, _ = http(srv.base, "/metrics")
        check("metrics", code == 200 and "strata_generated_tokens_total" in text_ and "strata_kv_bytes_in_use" in text_)
        code, text_, _ = http(srv.base, "/")
        check("web page served", code == 200 and "<title>Strata chat</title>" in text_)
        check("server healthy after all that", http(srv.base, "/health")[0] == 200)
    finally:
        srv.stop()

    # Overload: one slot, a queue of 2; a flood gets 503 + Retry-After and the server stays healthy.
    srv = Server("--parallel", "1", "--max-queue", "2", "--ctx", "512")
    try:
        def one(_):
            return http(srv.base, "/v1/completions", body={"prompt": "Once", "max_tokens": 60, "temperature": 0})
        with cf.ThreadPoolExecutor(12) as ex:
            results = list(ex.map(one, range(12)))
        codes = [r[0] for r in results]
        rejected = [r for r in results if r[0] == 503]
        check("flood: some requests refused with 503", 200 in codes and len(rejected) > 0, repr(codes))
        check("flood: 503 carries Retry-After", all("Retry-After" in r[2] for r in rejected))
        check("flood: still healthy", http(srv.base, "/health")[0] == 200 and one(0)[0] == 200)
    finally:
        srv.stop()

    # Thinking models: a random qwen3-shaped model with Qwen's vocabulary and a template that
    # switches thinking. Thinking off puts an empty <think></think> block into the prompt.
    tmp = tempfile.mkdtemp()
    tmpl = os.path.join(tmp, "template.jinja")
    with open(tmpl, "w") as f:
        f.write("{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>\\n' }}"
                "{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}")
    thinker = os.path.join(tmp, "thinker.gguf")
    vocab = os.path.join(os.path.dirname(os.path.abspath(MODEL)), "..", "tokenizer", "ggml-vocab-qwen2.gguf")
    r = subprocess.run([STRATA, "synth", "--arch", "qwen3", "--preset", "tiny", "--type", "Q8_0", "--vocab-from", vocab,
                        "--chat-template", tmpl, "-o", thinker], capture_output=True, text=True)
    check("synth a model with a thinking template", r.returncode == 0, r.stderr)
    srv = Server("--ctx", "512", model=thinker)
    try:
        client = openai.OpenAI(base_url=srv.base + "/v1", api_key="none")
        msgs = [{"role": "user", "content": "What are the three primary colours?"}]

        def prompt_tokens(**kw):
            return client.chat.completions.create(model="any", messages=msgs, max_tokens=4, temperature=0, **kw).usage.prompt_tokens

        on, off = prompt_tokens(), prompt_tokens(extra_body={"chat_template_kwargs": {"enable_thinking": False}})
        check("enable_thinking=false adds the empty think block", off > on, f"{on} vs {off}")
        check("reasoning_effort=none switches thinking off", prompt_tokens(reasoning_effort="none") == off)
        check("reasoning_effort=high leaves it on", prompt_tokens(reasoning_effort="high") == on)
        code, _, _ = http(srv.base, "/v1/chat/completions", body={"messages": msgs, "chat_template_kwargs": {"enable_thinking": "no"}})
        check("enable_thinking must be a boolean", code == 400)
        a = anthropic.Anthropic(base_url=srv.base, api_key="none")
        m1 = a.messages.create(model="any", max_tokens=4, messages=msgs)
        m2 = a.messages.create(model="any", max_tokens=4, messages=msgs, thinking={"type": "disabled"})
        check("anthropic thinking=disabled", m2.usage.input_tokens > m1.usage.input_tokens)
        with a.messages.stream(model="any", max_tokens=8, messages=msgs) as st:
            final = st.get_final_message()
        check("anthropic stream from a thinking model ends in a message", final.usage.output_tokens > 0)
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)

    # API key.
    srv = Server("--api-key", "sekret")
    try:
        check("no key -> 401", http(srv.base, "/v1/models")[0] == 401)
        check("bearer key -> 200", http(srv.base, "/v1/models", headers={"Authorization": "Bearer sekret"})[0] == 200)
        check("x-api-key -> 200", http(srv.base, "/v1/models", headers={"x-api-key": "sekret"})[0] == 200)
    finally:
        srv.stop()
    r = subprocess.run([STRATA, "serve", "-m", MODEL, "--host", "0.0.0.0", "--port", "0"], capture_output=True, text=True,
                       timeout=30, env={k: v for k, v in os.environ.items() if k != "STRATA_API_KEY"})
    check("non-loopback without a key is refused", r.returncode != 0 and "API key" in r.stderr, r.stderr)

    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


sys.exit(main())
