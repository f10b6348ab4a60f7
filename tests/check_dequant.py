#!/usr/bin/env python3
"""Independent check of strata's dequantizers: random blocks of every supported format are
written into a GGUF with the `gguf` Python package, dequantized by `strata tensor`, and compared
with gguf's numpy dequantizers. Exit 77 (ctest: skipped) when the package is missing."""
import os
import subprocess
import sys
import tempfile

try:
    import warnings
    warnings.simplefilter("ignore")
    import numpy as np
    from gguf import GGUFWriter, GGMLQuantizationType as T
    from gguf.constants import GGML_QUANT_SIZES
    from gguf.quants import dequantize
except ImportError as e:
    print(f"SKIP: the gguf/numpy Python packages are not installed ({e})")
    sys.exit(77)

strata = sys.argv[1]
FORMATS = ["F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL",
           "IQ2_XXS", "IQ2_XS", "IQ2_S", "IQ3_XXS", "IQ3_S", "IQ1_S", "IQ1_M", "IQ4_XS", "TQ1_0", "TQ2_0"]
rng = np.random.default_rng(1234)
rows, blocks_per_row = 8, 4
failures = 0
with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "blocks.gguf")
    w = GGUFWriter(path, "llama")
    expected = {}
    for name in FORMATS:
        qt = T[name]
        block, size = GGML_QUANT_SIZES[qt]
        cols = block * blocks_per_row if block > 1 else 256
        raw = rng.integers(0, 256, size=(rows, cols // block * size), dtype=np.uint8)
        # Redraw rows whose half-float scales decode to inf/NaN (plain F16 keeps them: both
        # sides must agree on every bit pattern there).
        for _ in range(100 if block > 1 else 0):
            vals = dequantize(raw, qt)
            bad = ~np.isfinite(vals).all(axis=1)
            if not bad.any():
                break
            raw[bad] = rng.integers(0, 256, size=(int(bad.sum()), raw.shape[1]), dtype=np.uint8)
        expected[name] = dequantize(raw, qt).astype(np.float32)
        w.add_tensor(name, raw, raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    for name in FORMATS:
        out = os.path.join(tmp, name + ".f32")
        r = subprocess.run([strata, "tensor", "-m", path, "--name", name, "-o", out], capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{name}: strata failed: {r.stderr.strip()}")
            failures += 1
            continue
        ours = np.fromfile(out, dtype=np.float32).reshape(expected[name].shape)
        ref = expected[name]
        exact = np.array_equal(ours, ref, equal_nan=True)
        close = np.allclose(ours, ref, rtol=1e-6, atol=0, equal_nan=True)
        finite = np.isfinite(ref) & np.isfinite(ours)
        diff = float(np.max(np.abs(ours[finite] - ref[finite]))) if finite.any() else 0.0
        print(f"{name:7s} {ref.size:6d} values  {'bit-exact' if exact else ('within 1e-6 relative' if close else 'MISMATCH')}  max|diff| {diff:.3g}")
        failures += not close
print(f"{len(FORMATS) - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
