#!/usr/bin/env python3
"""Side-by-side throughput of `strata bench` and llama.cpp's `llama-bench` on the same GGUF files.

Usage: bench-peer.py STRATA_BINARY MODEL.gguf... [--rounds N] [-p 128] [-n 32] [-d 0] [-t 2] [-r 3]
                     [--llama-bench PATH] [--json]

The peer is built once from the llama.cpp sources that the `llama-cpp-python` source package on
PyPI carries (pinned below), into $STRATA_CACHE (default ~/.cache/strata)/peer; nothing of it enters
this repository. Pass --llama-bench to use a build of your own instead. As in llama-bench, prompt
processing and generation are separate runs, both after -d context tokens (default none: generation
from an empty context). Each round runs every
model once with each engine, peer first, so a slow phase of a shared machine hits both alike; the
table gives medians over rounds of the two engines' own medians, and the ratio strata / peer.
Exits 77 (skip) with a message when the peer cannot be had."""
import argparse
import json
import os
import pathlib
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile

PEER_PACKAGE = "llama-cpp-python==0.3.36"


def skip(msg):
    print(f"bench-peer: {msg}", file=sys.stderr)
    sys.exit(77)


# Where the CPU has AMX, the pinned peer's AMX kernels can die with SIGILL (seen on a 2-core
# Xeon VM: tilezero in tinygemm_kernel_amx, an OpenMP worker); the peer is then rebuilt without
# AMX (its AVX-512 VNNI kernels stay), in a build folder of its own, and the table says so.
NO_AMX_FLAGS = "-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"


def build_peer(cache, no_amx=False):
    """Returns the path of a llama-bench built from the pinned source package, building it once."""
    root = cache / "peer"
    build = "build-noamx" if no_amx else "build"
    exe = root / "llama.cpp" / build / "bin" / "llama-bench"
    if exe.exists():
        return exe
    if no_amx and (root / "llama.cpp" / "CMakeLists.txt").exists():
        return compile_peer(root / "llama.cpp", build, exe, no_amx)
    root.mkdir(parents=True, exist_ok=True)
    dl = root / "download"
    if subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
                       "--no-binary", ":all:", "-d", str(dl), PEER_PACKAGE]).returncode != 0:
        skip(f"could not download {PEER_PACKAGE} from PyPI")
    sdist = next(dl.glob("llama_cpp_python-*.tar.gz"), None)
    if sdist is None:
        skip("the downloaded package has no source archive")
    src = root / "llama.cpp"
    shutil.rmtree(src, ignore_errors=True)
    with tarfile.open(sdist) as tar:
        prefix = tar.getnames()[0].split("/")[0] + "/vendor/llama.cpp/"
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        for m in members:
            m.name = m.name[len(prefix):]
        # ".git" is a submodule pointer into the package's own repository, which is not there.
        tar.extractall(src, members=[m for m in members if m.name and m.name != ".git"], filter="data")
    return compile_peer(src, build, exe, no_amx)


def compile_peer(src, build, exe, no_amx):
    print(f"bench-peer: building llama-bench{' without AMX' if no_amx else ''} (a few minutes on 2 cores)",
          file=sys.stderr)
    cfg = ["cmake", "-S", str(src), "-B", str(src / build), "-DCMAKE_BUILD_TYPE=Release", "-DGGML_NATIVE=ON",
           "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DLLAMA_BUILD_TESTS=OFF"]
    if no_amx:
        cfg += ["-DGGML_AMX_TILE=OFF", "-DGGML_AMX_INT8=OFF", "-DGGML_AMX_BF16=OFF",
                f"-DCMAKE_C_FLAGS={NO_AMX_FLAGS}", f"-DCMAKE_CXX_FLAGS={NO_AMX_FLAGS}"]
    # The peer's compiler warnings are its own: shown only when its build fails.
    for cmd in (cfg, ["cmake", "--build", str(src / build), "-j2", "--target", "llama-bench"]):
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            skip(f"building llama-bench failed:\n{out.stderr[-2000:]}")
    if not exe.exists():
        skip("building llama-bench failed: no llama-bench was made")
    return exe


class Crashed(RuntimeError):
    def __init__(self, msg, sig):
        super().__init__(msg)
        self.sig = sig


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode < 0:
        raise Crashed(f"{' '.join(cmd)} failed (killed by {signal.Signals(-out.returncode).name}):\n"
                      f"{out.stderr[-2000:]}", -out.returncode)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed (exit code {out.returncode}):\n{out.stderr[-2000:]}")
    return json.loads(out.stdout)


class PeerCrashed(Crashed):
    pass


def peer_once(exe, model, a):
    try:
        depth = ["-d", str(a.d)] if a.d else []
        rows = run_json([str(exe), "-m", model, "-p", str(a.p), "-n", str(a.n), "-t", str(a.t), "-r", str(a.r), "-o", "json"] + depth)
    except Crashed as e:
        raise PeerCrashed(str(e), e.sig) from e
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] > 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] > 0)
    return pp, tg


def strata_once(exe, model, a):
    # Two runs, as llama-bench's pp and tg tests are separate: its tg test generates after the -d
    # context alone, while `strata bench -p P -n N` generates after the P prompt tokens.
    common = ["-t", str(a.t), "-r", str(a.r), "-d", str(a.d), "--json"]
    pp = run_json([exe, "bench", "-m", model, "-p", str(a.p), "-n", "0"] + common)
    tg = run_json([exe, "bench", "-m", model, "-p", "0", "-n", str(a.n)] + common)
    # The generation run's two bandwidth readings (before and after its repetitions) and whether
    # `strata bench` judged that the memory changed speed between them; binaries older than the
    # fields give the kept reading twice and no judgement.
    readings = (tg.get("bandwidth_before_gbps", tg["bandwidth_gbps"]), tg.get("bandwidth_after_gbps", tg["bandwidth_gbps"]),
                tg.get("bandwidth_moved", False))
    return pp["pp_tokens_per_s"], tg["tg_tokens_per_s"], tg["bandwidth_gbps"], tg["model_bytes_per_token"], readings


def measure(a, exe):
    samples = {m: {"peer": [], "strata": []} for m in a.models}
    for rnd in range(a.rounds):
        for m in a.models:
            pp, tg = peer_once(exe, m, a)
            samples[m]["peer"].append({"pp": pp, "tg": tg})
            pp2, tg2, bw, bpt, (before, after, moved) = strata_once(a.strata, m, a)
            samples[m]["strata"].append({"pp": pp2, "tg": tg2, "bandwidth_gbps": bw, "bytes_per_token": bpt,
                                         "bandwidth_before_gbps": before, "bandwidth_after_gbps": after})
            # A round whose memory changed speed during strata's generation run: its ratio says little.
            print(f"round {rnd + 1} {os.path.basename(m)}: peer pp {pp:.1f} tg {tg:.1f} | strata pp {pp2:.1f} "
                  f"tg {tg2:.1f} (bandwidth {bw:.1f} GB/s: {before:.1f} before, {after:.1f} after"
                  f"{'; the memory changed speed during the run' if moved else ''})", file=sys.stderr, flush=True)
    return samples


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("strata")
    ap.add_argument("models", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-p", type=int, default=128)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-d", type=int, default=0, help="context tokens before each test (llama-bench's -d)")
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--llama-bench", dest="llama_bench")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    cache = pathlib.Path(os.environ.get("STRATA_CACHE", pathlib.Path.home() / ".cache" / "strata"))
    # Absolute paths: a bare relative name such as "strata" would otherwise be looked up in PATH.
    a.strata = os.path.abspath(a.strata)
    exe = pathlib.Path(a.llama_bench).resolve() if a.llama_bench else build_peer(cache)
    peer_name = PEER_PACKAGE if not a.llama_bench else str(exe)
    try:
        samples = measure(a, exe)
    except PeerCrashed as e:
        if a.llama_bench or e.sig != signal.SIGILL:
            raise
        print("bench-peer: the peer died with SIGILL; measuring every model again with a build without AMX",
              file=sys.stderr, flush=True)
        exe = build_peer(cache, no_amx=True)
        peer_name += " (built without AMX)"
        samples = measure(a, exe)
    print(f"peer: {peer_name}")
    med = lambda xs: statistics.median(xs)
    summary = {}
    print(f"| model | peer pp | strata pp | pp ratio | peer tg | strata tg | tg ratio | strata tg GB/s | bandwidth GB/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for m, s in samples.items():
        pp_p, tg_p = med([x["pp"] for x in s["peer"]]), med([x["tg"] for x in s["peer"]])
        pp_s, tg_s = med([x["pp"] for x in s["strata"]]), med([x["tg"] for x in s["strata"]])
        bw = med([x["bandwidth_gbps"] for x in s["strata"]])
        gbps = tg_s * s["strata"][0]["bytes_per_token"] / 1e9
        summary[m] = {"peer_pp": pp_p, "peer_tg": tg_p, "strata_pp": pp_s, "strata_tg": tg_s, "pp_ratio": pp_s / pp_p,
                      "tg_ratio": tg_s / tg_p, "bandwidth_gbps": bw, "samples": s}
        print(f"| {os.path.basename(m)} | {pp_p:.1f} | {pp_s:.1f} | {pp_s / pp_p:.2f} | {tg_p:.1f} | {tg_s:.1f} | "
              f"{tg_s / tg_p:.2f} | {gbps:.1f} | {bw:.1f} |")
    if a.json:
        print(json.dumps({"settings": {"p": a.p, "n": a.n, "d": a.d, "t": a.t, "r": a.r, "rounds": a.rounds,
                                       "peer": peer_name}, "models": summary}))


if __name__ == "__main__":
    main()
