#!/usr/bin/env bash
# Builds the libFuzzer targets with clang; fuzzes the GGUF and importance-matrix readers and the
# API request parsers for ${1:-60} seconds each.
set -euo pipefail
cd "$(dirname "$0")/.."
secs="${1:-60}"
dir=build-fuzz
CC=clang CXX=clang++ cmake -S . -B $dir -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" -DSTRATA_FUZZ=ON -DSTRATA_TESTS=OFF \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -Wno-pass-failed" >/dev/null
cmake --build $dir -j"${JOBS:-2}" --target fuzz_gguf fuzz_requests
mkdir -p $dir/corpus
# Seed: a small valid GGUF with a SentencePiece vocabulary and one tensor.
python3 - "$dir/corpus/seed.gguf" <<'PY'
import struct, sys
def s(x): b = x.encode(); return struct.pack('<Q', len(b)) + b
kv = []
kv.append(s('general.architecture') + struct.pack('<I', 8) + s('llama'))
kv.append(s('tokenizer.ggml.model') + struct.pack('<I', 8) + s('llama'))
toks = ['<unk>', '<s>', '</s>', '\u2581Hello', '\u2581world', 'H', 'e', 'l', 'o', '<0x31>']
kv.append(s('tokenizer.ggml.tokens') + struct.pack('<IIQ', 9, 8, len(toks)) + b''.join(s(t) for t in toks))
kv.append(s('tokenizer.ggml.scores') + struct.pack('<IIQ', 9, 6, len(toks)) + struct.pack('<%df' % len(toks), *range(len(toks))))
kv.append(s('tokenizer.ggml.token_type') + struct.pack('<IIQ', 9, 5, len(toks)) + struct.pack('<%di' % len(toks), 2, 3, 3, 1, 1, 1, 1, 1, 1, 6))
kv.append(s('tokenizer.ggml.bos_token_id') + struct.pack('<II', 4, 1))
tensor = s('w') + struct.pack('<IQQIQ', 2, 32, 2, 8, 0)
head = b'GGUF' + struct.pack('<IQQ', 3, 1, len(kv)) + b''.join(kv) + tensor
head += b'\0' * (-len(head) % 32)
open(sys.argv[1], 'wb').write(head + bytes(68))
PY
# Seed: an importance matrix in the older binary layout (one entry, then chunk count and dataset).
python3 - "$dir/corpus/seed-imatrix.dat" <<'PY'
import struct, sys
name = b'blk.0.ffn_up.weight'
body = struct.pack('<ii', 1, len(name)) + name + struct.pack('<ii', 4, 4) + struct.pack('<4f', 1, 2, 3, 4)
open(sys.argv[1], 'wb').write(body + struct.pack('<ii', 4, 4) + b'wiki')
PY
$dir/fuzz/fuzz_gguf $dir/corpus -max_total_time="$secs" -max_len=65536 -print_final_stats=1 2>&1 | tail -n 12
mkdir -p $dir/corpus-requests
printf '%s' '{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"stream":true,"stop":["x"],"temperature":0.5}' > $dir/corpus-requests/chat.json
printf '%s' '{"prompt":[1,2,3],"max_tokens":3,"logprobs":2}' > $dir/corpus-requests/completion.json
$dir/fuzz/fuzz_requests $dir/corpus-requests -max_total_time="$secs" -max_len=4096 -print_final_stats=1 2>&1 | tail -n 6
