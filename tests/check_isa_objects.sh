#!/usr/bin/env bash
# The kernel files compiled with ISA flags must define no weak functions. A weak function (a std
# template instance such as std::vector<float>::_M_default_append, or an inline function not
# inlined) is merged by the linker with the other files' copies, and the copy it keeps serves
# the whole program: an AVX-512 one faults in baseline code on a CPU without AVX-512.
# Usage: check_isa_objects.sh <expected object count> <object files...>
set -euo pipefail
expected=$1
shift
if [ "$#" -ne "$expected" ]; then
  echo "expected $expected ISA-flagged objects, got $#: $*" >&2
  exit 1
fi
status=0
for o in "$@"; do
  weak=$(nm --defined-only "$o" | awk '$2 == "W" { print $3 }')
  if [ -n "$weak" ]; then
    echo "$o defines weak functions, which the linker may keep for baseline callers:" >&2
    echo "$weak" | c++filt | sed 's/^/  /' >&2
    status=1
  fi
done
[ "$status" -eq 0 ] && echo "$# ISA-flagged objects, no weak functions"
exit "$status"
