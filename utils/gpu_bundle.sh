#!/usr/bin/env bash
# Builds, on this (GPU-less) machine, everything the device machine needs to
# check and benchmark the GPU kernels (see docs/GPU.md):
#
#   bash utils/gpu_bundle.sh [DIR]          DIR defaults to .device
#
# Into DIR (git-ignored; at most ~60 MiB so that it fits the GPU runner's
# `carry`):
#   gpu/<neuron>.{cubin,h.gz}         flexsn-opt --flexsn-lower-to-nvvm with
#                                     variants=inference,final-state,forward,
#                                     backward, then flexsn-translate
#                                     --flexsn-to-{header,cubin} (headers
#                                     gzipped: they embed the cubin as hex) for
#                                     every lib/Neurons/*.mlir, plus copies
#                                     generated into src/: <neuron>_soft
#                                     (soft_reset = true; all four variants),
#                                     <neuron>_detach and <neuron>_soft_detach
#                                     (detach_reset = true; forward and
#                                     backward only) of each neuron with those
#                                     flags;
#   manifests/<neuron>.json           flexsn-translate --flexsn-to-manifest;
#   bundle.c, libflexsn_bundle.so     a C shim including every header and
#                                     exporting fx_<neuron>_<variant>_<dtype>
#                                     (the header's flexsn_<...> function: the
#                                     manifest's buffers, workspace included,
#                                     then its parameters) and, for training
#                                     kernels, fx_<...>_workspace_bytes,
#                                     compiled with lib/Runtime/
#                                     flexsn_runtime.c; loads libcuda with
#                                     dlopen (no -lcuda);
#   cpu/...npy, cpu/index.json        CPU-path results (build/bin/flexsn-run) on
#                                     seeded random inputs, for every neuron x
#                                     {inference, final-state} x {f32, f16} x
#                                     T in {0, 1, 16, 64} x N in {1, 1000},
#                                     hard reset, plus soft reset at T = 16; the
#                                     inputs are stored too (spikes as uint8);
#   cpu/train/...npy,                 flexsn-run --variant=train (forward
#   cpu/train_index.json              values and gradients) for every neuron at
#                                     N = 256: hard reset f32 T in {1, 16}, f16
#                                     T = 16; soft, detach, soft+detach f32
#                                     T = 16; random output and state-sequence
#                                     gradients;
#   device_smoke                      test/Runtime/device_smoke.c, if present,
#                                     linked against the libcuda stub;
#   bundle.json                       what is where: kernels, functions,
#                                     statuses (enum values), files, versions.
#
# Environment: FLEXSN_BUILD_DIR (default build), FLEXSN_CUDA_TOOLKIT (default
# /usr/local/cuda), FLEXSN_CHIP (default sm_90), PYTHON (a python3 with numpy;
# found automatically). Prints the folder size at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

DIR=${1:-.device}
BUILD_DIR=${FLEXSN_BUILD_DIR:-build}
CUDA_TOOLKIT=${FLEXSN_CUDA_TOOLKIT:-/usr/local/cuda}
CHIP=${FLEXSN_CHIP:-sm_90}
MAX_MIB=60

OPT=$BUILD_DIR/bin/flexsn-opt
TRANSLATE=$BUILD_DIR/bin/flexsn-translate
RUN=$BUILD_DIR/bin/flexsn-run

log() { printf '==> %s\n' "$*"; }
die() { printf 'gpu_bundle.sh: error: %s\n' "$*" >&2; exit 1; }

for tool in "$OPT" "$TRANSLATE" "$RUN"; do
  [ -x "$tool" ] || die "$tool is missing: build FlexSN first"
done
[ -f "$CUDA_TOOLKIT/include/cuda.h" ] || die "no $CUDA_TOOLKIT/include/cuda.h"
command -v gcc >/dev/null || die "gcc is not on PATH"

# A python3 with numpy (Debian's /usr/bin/python3 has it; pyenv's may not).
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null &&
       "$cand" -c 'import numpy' >/dev/null 2>&1; then
      PY=$cand
      break
    fi
  done
fi
[ -n "$PY" ] || die "no python3 with numpy found (set PYTHON=...)"

# Keep the bundle out of git: .gitignore lists /.device/, and so does the
# local exclude file (which also covers other folder names).
case "$DIR" in
  /*) ;;
  *)
    if [ -d .git ]; then
      mkdir -p .git/info
      touch .git/info/exclude
      entry="/${DIR#./}"
      entry="${entry%/}/"
      grep -qxF "$entry" .git/info/exclude || echo "$entry" >>.git/info/exclude
    fi
    ;;
esac

# Start from an empty folder, but never wipe something that is not a bundle.
if [ -e "$DIR" ]; then
  if [ -f "$DIR/.flexsn-bundle" ] || [ -z "$(ls -A "$DIR" 2>/dev/null)" ]; then
    rm -rf "$DIR"
  else
    die "$DIR exists and is not a bundle (no .flexsn-bundle); remove it first"
  fi
fi
mkdir -p "$DIR"/{gpu,manifests,src,cpu}
echo "made by utils/gpu_bundle.sh; rebuilt from scratch on every run" >"$DIR/.flexsn-bundle"
DIR=$(cd "$DIR" && pwd)
START=$(date +%s)

# --- 1. GPU artifacts -------------------------------------------------------
# Every neuron gets all four kernel variants (inference, final-state and the
# training pair forward/backward); its soft-reset copy too; the detach_reset
# copies (<neuron>_detach: hard reset, <neuron>_soft_detach: soft reset) only
# the training pair (detach changes gradients, not the forward values). The
# .gpu.mlir modules are intermediate (the header embeds the cubin): they stay
# in a temporary folder, out of the bundle.
ALL_VARIANTS=inference,final-state,forward,backward
TRAIN_VARIANTS=forward,backward
log "compiling neurons for $CHIP"
NEURONS=()
MLIR_TMP=$(mktemp -d)
trap 'rm -rf "$MLIR_TMP"' EXIT
compile_neuron() { # compile_neuron FILE NAME VARIANTS
  local file=$1 name=$2 variants=$3 t0 t1
  t0=$(date +%s.%N)
  "$OPT" "$file" \
    "--flexsn-lower-to-nvvm=chip=$CHIP toolkit=$CUDA_TOOLKIT variants=$variants" \
    -o "$MLIR_TMP/$name.gpu.mlir"
  "$TRANSLATE" --flexsn-to-header "$MLIR_TMP/$name.gpu.mlir" -o "$DIR/gpu/$name.h"
  "$TRANSLATE" --flexsn-to-manifest "$MLIR_TMP/$name.gpu.mlir" \
    -o "$DIR/manifests/$name.json"
  "$TRANSLATE" --flexsn-to-cubin "$MLIR_TMP/$name.gpu.mlir" -o "$DIR/gpu/$name.cubin"
  rm -f "$MLIR_TMP/$name.gpu.mlir"
  t1=$(date +%s.%N)
  NEURONS+=("$name")
  printf '    %-20s %6.2f s  cubin %7d bytes  (%s)\n' "$name" \
    "$(echo "$t1 - $t0" | bc)" "$(stat -c %s "$DIR/gpu/$name.cubin")" "$variants"
}
# copy_neuron FILE NAME SUFFIX SOFT DETACH: a copy of the neuron whose flag
# defaults are changed (the GPU pipeline specializes const parameters to
# their defaults), named <name><suffix>, generated into src/.
copy_neuron() {
  local file=$1 name=$2 suffix=$3 soft=$4 detach=$5
  sed -e "s/flexsn\.neuron @$name\b/flexsn.neuron @${name}${suffix}/" \
      -e "s/%soft_reset: i1 = false/%soft_reset: i1 = $soft/" \
      -e "s/%detach_reset: i1 = false/%detach_reset: i1 = $detach/" \
      "$file" >"$DIR/src/${name}${suffix}.mlir"
  echo "$DIR/src/${name}${suffix}.mlir"
}
for file in lib/Neurons/*.mlir; do
  name=$(sed -n 's/^ *flexsn\.neuron @\([A-Za-z0-9_]*\).*/\1/p' "$file" | head -n 1)
  [ -n "$name" ] || die "$file defines no flexsn.neuron"
  compile_neuron "$file" "$name" "$ALL_VARIANTS"
  has_soft=0 has_detach=0
  grep -q '%soft_reset: i1 = false' "$file" && has_soft=1
  grep -q '%detach_reset: i1 = false' "$file" && has_detach=1
  if [ $has_soft -eq 1 ]; then
    compile_neuron "$(copy_neuron "$file" "$name" _soft true false)" \
      "${name}_soft" "$ALL_VARIANTS"
  fi
  if [ $has_detach -eq 1 ]; then
    compile_neuron "$(copy_neuron "$file" "$name" _detach false true)" \
      "${name}_detach" "$TRAIN_VARIANTS"
    if [ $has_soft -eq 1 ]; then
      compile_neuron "$(copy_neuron "$file" "$name" _soft_detach true true)" \
        "${name}_soft_detach" "$TRAIN_VARIANTS"
    fi
  fi
done

# --- 2. Status enum values (from the header, by the C compiler) ------------
log "reading the flexsn_status enum"
RUNTIME_H=include/flexsn/Runtime/flexsn_runtime.h
RUNTIME_C=lib/Runtime/flexsn_runtime.c
[ -f "$RUNTIME_H" ] && [ -f "$RUNTIME_C" ] || die "the C runtime is missing"
STATUS_NAMES=$(sed -n '/typedef enum flexsn_status/,/} flexsn_status;/p' "$RUNTIME_H" |
  grep -o '^ *FLEXSN_[A-Z_]*' | tr -d ' ')
[ -n "$STATUS_NAMES" ] || die "no flexsn_status enumerators in $RUNTIME_H"
{
  echo '#include <stdio.h>'
  echo '#include "flexsn_runtime.h"'
  echo 'int main(void) {'
  echo '  printf("{");'
  first=1
  for s in $STATUS_NAMES; do
    if [ $first -eq 1 ]; then sep=""; first=0; else sep=", "; fi
    echo "  printf(\"$sep\\\"$s\\\": %d\", (int)$s);"
  done
  echo '  printf("}\n");'
  echo '  return 0;'
  echo '}'
} >"$DIR/src/statuses.c"
gcc -std=c99 -I"$CUDA_TOOLKIT/include" -Iinclude/flexsn/Runtime \
  "$DIR/src/statuses.c" -o "$DIR/src/statuses"
"$DIR/src/statuses" >"$DIR/statuses.json"
rm -f "$DIR/src/statuses"

# --- 3. bundle.c and libflexsn_bundle.so ------------------------------------
log "generating bundle.c"
"$PY" - "$DIR" "${NEURONS[@]}" <<'EOF'
import json, os, sys
out, names = sys.argv[1], sys.argv[2:]
CTYPE = {"f32": "float", "f16": "uint16_t", "bf16": "uint16_t"}
SCALAR = {"f32": "float", "i1": "bool", "i32": "int32_t", "i64": "int64_t"}
# Buffers the kernel only reads (const pointers in the header).
READ = ("input_sequence", "initial_state", "optional_input_sequence",
        "workspace_in")
ROLES = READ + ("output_sequence", "state_sequence", "final_state",
                "param_gradient", "workspace_out", "workspace_inout")
lines = [
    "/* Generated by utils/gpu_bundle.sh. Do not edit.",
    " * Includes every FlexSN header and exports one non-static wrapper per",
    " * kernel function, fx_<neuron>_<variant>_<dtype>, with the parameters of",
    " * the header's static inline flexsn_<neuron>_<variant>_<dtype> (the",
    " * manifest's arguments: buffers, workspace included, then parameters),",
    " * and, for the training kernels, fx_<kernel>_workspace_bytes. */",
    "#include <stdbool.h>",
    "#include <stddef.h>",
    "#include <stdint.h>",
    '#include "flexsn_runtime.h"',
]
lines += ['#include "gpu/%s.h"' % n for n in names]
lines.append("")
count = 0
unloads = []
for n in names:
    m = json.load(open(os.path.join(out, "manifests", n + ".json")))
    for k in m["kernels"]:
        fn = k["function"]
        assert fn == "flexsn_" + k["name"], fn
        params = ["CUstream stream", "int64_t T", "int64_t N", "int64_t ld"]
        args = ["stream", "T", "N", "ld"]
        for a in k["arguments"]:
            role = a["role"]
            if role == "size":
                assert a["name"] in ("T", "N", "ld"), a
                continue
            if role == "param":
                params.append("%s %s" % (SCALAR[a["dtype"]], a["name"]))
            else:
                assert role in ROLES, (k["name"], a)
                const = "const " if role in READ else ""
                params.append("%s%s *%s" % (const, CTYPE[a["dtype"]], a["name"]))
            args.append(a["name"])
        # The header orders buffers (workspace included) as the manifest does,
        # then the parameters; check that the workspace is where it says.
        roles = [a["role"] for a in k["arguments"]]
        ws = [r for r in roles if r.startswith("workspace")]
        if k.get("workspace_sequences", 0) or k.get("reduction_slots", 0):
            want = ("workspace_inout" if k.get("deterministic") else
                    "workspace_out" if k["variant"] == "forward" else
                    "workspace_in")
            assert ws == [want], (k["name"], roles)
        else:
            assert not ws, (k["name"], roles)
        lines.append("flexsn_status fx_%s(%s) {" % (k["name"], ", ".join(params)))
        lines.append("  return %s(%s);" % (fn, ", ".join(args)))
        lines.append("}")
        count += 1
        if ws:
            lines.append("size_t fx_%s_workspace_bytes(int64_t T, int64_t N, "
                         "int64_t ld) {" % k["name"])
            lines.append("  return %s_workspace_bytes(T, N, ld);" % fn)
            lines.append("}")
    unloads.append("flexsn_%s_unload" % n)
lines.append("")
lines.append("/* Unloads every image; returns the first failing status. */")
lines.append("flexsn_status fx_unload_all(void) {")
lines.append("  flexsn_status status = FLEXSN_SUCCESS, s;")
for u in unloads:
    lines.append("  s = %s();" % u)
    lines.append("  if (s != FLEXSN_SUCCESS && status == FLEXSN_SUCCESS) status = s;")
lines.append("  return status;")
lines.append("}")
lines.append("")
lines.append("int fx_kernel_count(void) { return %d; }" % count)
open(os.path.join(out, "bundle.c"), "w").write("\n".join(lines) + "\n")
print("    %d kernel functions from %d neurons" % (count, len(names)))
EOF
log "compiling libflexsn_bundle.so"
gcc -std=c99 -O2 -shared -fPIC -Wall -Wextra -Werror=incompatible-pointer-types \
  -Werror=int-conversion -Werror=implicit-function-declaration \
  -I"$CUDA_TOOLKIT/include" -Iinclude/flexsn/Runtime -Iinclude -I"$DIR" \
  "$DIR/bundle.c" "$RUNTIME_C" -o "$DIR/libflexsn_bundle.so" -ldl -lpthread
if ldd "$DIR/libflexsn_bundle.so" | grep -q libcuda; then
  die "libflexsn_bundle.so links libcuda (it must dlopen it)"
fi

# The runtime's own device smoke test, when there is one.
if [ -f test/Runtime/device_smoke.c ]; then
  log "compiling device_smoke"
  gcc -std=c99 -O2 -I"$CUDA_TOOLKIT/include" -Iinclude \
    test/Runtime/device_smoke.c "$RUNTIME_C" -o "$DIR/device_smoke" \
    -L"$CUDA_TOOLKIT/lib64/stubs" -lcuda -ldl -lpthread ||
    log "device_smoke did not build (skipped)"
fi

# The headers embed the cubins as hex text (~6x their size): compress them
# (only libflexsn_bundle.so is needed on the device; `gunzip -k` to build
# against a header there).
gzip -9n "$DIR"/gpu/*.h

# --- 4. CPU-path reference results ------------------------------------------
log "CPU-path results with flexsn-run"
"$PY" - "$DIR" "$RUN" "${NEURONS[@]}" <<'EOF'
import json, os, subprocess, sys, zlib
import numpy as np

out, run_tool, names = sys.argv[1], sys.argv[2], sys.argv[3:]
TS = (0, 1, 16, 64)
NS = (1, 1000)
DTYPES = {"f32": np.float32, "f16": np.float16}
SOFT_T = 16
# Input drive, initial-state ranges and runtime-parameter values: the device
# checks' (many neurons spike, none runs away).
sys.dont_write_bytecode = True
sys.path.insert(0, "utils")
from device_check import DRIVE, DRIVE_SOFT, INIT, RUNTIME_PARAMS  # noqa: E402

base = [n for n in names if not n.endswith(("_soft", "_detach"))]
entries = []
total = 0
for neuron in base:
    man = json.load(open(os.path.join(out, "manifests", neuron + ".json")))
    nd = [x for x in man["neurons"] if x["name"] == neuron][0]
    kernels = {(k["variant"].replace("-", "_"), k["dtype"]): k
               for k in man["kernels"]}
    runtime = {p["name"]: RUNTIME_PARAMS.get(p["name"], p["default"])
               for p in nd["params"] if p["kind"] != "const"}
    has_soft = neuron + "_soft" in names
    configs = [("hard", d, T, N) for d in DTYPES for T in TS for N in NS]
    if has_soft:
        configs += [("soft", d, SOFT_T, N) for d in DTYPES for N in NS]
    for reset, dname, T, N in configs:
        mean, std = DRIVE.get(neuron, (0.6, 0.8))
        if reset == "soft":
            mean, std = DRIVE_SOFT.get(neuron, (mean, std))
        dt = DTYPES[dname]
        seed = [zlib.crc32(neuron.encode()), 1 if reset == "soft" else 0,
                list(DTYPES).index(dname), T, N]
        rng = np.random.default_rng(seed)
        tag = "%s_%s_T%d_N%d" % (reset, dname, T, N)
        d = os.path.join("cpu", neuron, tag)
        os.makedirs(os.path.join(out, d), exist_ok=True)
        x = rng.normal(mean, std, (T, N)).astype(dt)
        files = {}
        np.save(os.path.join(out, d, "x.npy"), x)
        inputs = {nd["inputs"][0]: os.path.join(d, "x.npy")}
        assert len(nd["inputs"]) == 1
        init = {}
        state_args = []
        init_names = [a["name"] for a in kernels[("inference", dname)]["arguments"]
                      if a["role"] == "initial_state"]
        assert len(init_names) == len(nd["states"]), init_names
        for s, arg in zip(nd["states"], init_names):
            lo, hi = INIT.get(s, (-0.2, 0.5))
            s0 = rng.uniform(lo, hi, (N,)).astype(dt)
            f = os.path.join(d, "%s.npy" % arg)
            np.save(os.path.join(out, f), s0)
            init[arg] = f
            state_args.append("--state=@" + os.path.join(out, f))
        params = dict(runtime)
        variants = {}
        for variant in ("inference", "final_state"):
            k = kernels[(variant, dname)]
            bufs = [a for a in k["arguments"]
                    if a["role"] in ("output_sequence", "state_sequence",
                                     "final_state")]
            odir = os.path.join(out, d, "out_" + variant)
            os.makedirs(odir)
            cmd = [run_tool, os.path.join("lib", "Neurons", neuron + ".mlir"),
                   "--neuron=" + neuron,
                   "--variant=" + variant.replace("_", "-"),
                   "--input=@" + os.path.join(out, d, "x.npy")] + state_args
            if reset == "soft":
                cmd.append("--param=soft_reset=true")
            for pn, pv in params.items():
                cmd.append("--param=%s=%r" % (pn, float(pv)))
            cmd.append("--output-dir=" + odir)
            p = subprocess.run(cmd, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
            if p.returncode != 0:
                sys.exit("flexsn-run failed (%d): %s\n%s"
                         % (p.returncode, " ".join(cmd), p.stdout))
            # flexsn-run writes out<i>.npy per output, then state_seq<i>.npy
            # (inference) or final_state<i>.npy (final-state) per state.
            nout = len(nd["outputs"])
            tool_files = ["out%d.npy" % i for i in range(nout)]
            kind = "state_seq" if variant == "inference" else "final_state"
            tool_files += ["%s%d.npy" % (kind, i)
                           for i in range(len(nd["states"]))]
            assert len(tool_files) == len(bufs), (tool_files, bufs)
            got = sorted(os.listdir(odir))
            if got != sorted(tool_files):
                sys.exit("flexsn-run wrote %s, expected %s" % (got, tool_files))
            res = {}
            for tf, a in zip(tool_files, bufs):
                arr = np.load(os.path.join(odir, tf))
                want = (T, N) if a["role"] != "final_state" else (N,)
                assert arr.shape == want and arr.dtype == dt, \
                    (tf, arr.shape, arr.dtype)
                if a["role"] == "output_sequence":
                    # Spikes are exactly 0 or 1: store them as uint8.
                    assert np.all((arr == 0) | (arr == 1)), tf
                    arr = arr.astype(np.uint8)
                f = os.path.join(d, "%s_%s.npy" % (variant, a["name"]))
                np.save(os.path.join(out, f), arr)
                res[a["name"]] = f
                os.remove(os.path.join(odir, tf))
            os.rmdir(odir)
            variants[variant] = res
            total += 1
        entries.append(dict(
            neuron=neuron, gpu_neuron=neuron + ("_soft" if reset == "soft" else ""),
            reset=reset, dtype=dname, T=T, N=N, seed=seed,
            drive=dict(mean=mean, std=std), params=params,
            inputs=inputs, initial_states=init, results=variants))
index = dict(
    format="flexsn-cpu-results", version=1,
    note="CPU-path (flexsn-run) results on the stored seeded inputs; spikes "
         "stored as uint8 (exactly 0/1), everything else in the storage dtype; "
         "paths are relative to the bundle folder",
    entries=entries)
json.dump(index, open(os.path.join(out, "cpu", "index.json"), "w"), indent=1)
print("    %d flexsn-run calls, %d input sets" % (total, len(entries)))
EOF

log "CPU-path training results with flexsn-run --variant=train"
"$PY" - "$DIR" "$RUN" "${NEURONS[@]}" <<'EOF'
import json, os, subprocess, sys, zlib
import numpy as np

out, run_tool, names = sys.argv[1], sys.argv[2], sys.argv[3:]
N = 256
# Input drive, initial-state ranges and runtime-parameter values: the device
# checks' (many neurons spike, none runs away).
sys.dont_write_bytecode = True
sys.path.insert(0, "utils")
from device_check import DRIVE, DRIVE_SOFT, INIT, RUNTIME_PARAMS  # noqa: E402
DTYPES = {"f32": np.float32, "f16": np.float16}
RESETS = {"hard": ("", False, False), "soft": ("_soft", True, False),
          "detach": ("_detach", False, True),
          "soft_detach": ("_soft_detach", True, True)}

base = [n for n in names if not n.endswith(("_soft", "_detach"))]
entries = []
calls = 0
for neuron in base:
    man = json.load(open(os.path.join(out, "manifests", neuron + ".json")))
    nd = [x for x in man["neurons"] if x["name"] == neuron][0]
    assert len(nd["inputs"]) == 1 and len(nd["outputs"]) == 1, nd
    bwd = {k["dtype"]: k for k in man["kernels"]
           if k["variant"] == "backward" and not k.get("deterministic")}
    fwd = {k["dtype"]: k for k in man["kernels"] if k["variant"] == "forward"}
    runtime = {p["name"]: RUNTIME_PARAMS.get(p["name"], p["default"])
               for p in nd["params"] if p["kind"] != "const"}
    configs = [("hard", "f32", 1), ("hard", "f32", 16), ("hard", "f16", 16)]
    configs += [(r, "f32", 16) for r in ("soft", "detach", "soft_detach")
                if neuron + RESETS[r][0] in names]
    for reset, dname, T in configs:
        suffix, soft, detach = RESETS[reset]
        dt = DTYPES[dname]
        mean, std = DRIVE[neuron]
        if soft:
            mean, std = DRIVE_SOFT.get(neuron, (mean, std))
        seed = [zlib.crc32(("train/" + neuron).encode()),
                list(RESETS).index(reset), list(DTYPES).index(dname), T, N]
        rng = np.random.default_rng(seed)
        d = os.path.join("cpu", "train", neuron, "%s_%s_T%d_N%d"
                         % (reset, dname, T, N))
        os.makedirs(os.path.join(out, d))
        def save(name, arr):
            f = os.path.join(d, name + ".npy")
            np.save(os.path.join(out, f), arr)
            return f
        kf, kb = fwd[dname], bwd[dname]
        x_name = [a["name"] for a in kf["arguments"]
                  if a["role"] == "input_sequence"][0]
        init_names = [a["name"] for a in kf["arguments"]
                      if a["role"] == "initial_state"]
        inputs = {x_name: save(x_name, rng.normal(mean, std, (T, N)).astype(dt))}
        inits = {}
        for s, arg in zip(nd["states"], init_names):
            lo, hi = INIT.get(s, (-0.2, 0.5))
            inits[arg] = save(arg, rng.uniform(lo, hi, (N,)).astype(dt))
        # Incoming gradients: every output's and every state sequence's
        # (flexsn-run has no final-state gradient: zeros).
        grads = {}
        for a in kb["arguments"]:
            if a["role"] == "optional_input_sequence":
                grads[a["name"]] = save(a["name"],
                                        rng.normal(0.0, 1.0, (T, N)).astype(dt))
        out_grads = [g for g in grads if g[:-len("_grad")] in nd["outputs"]]
        state_grads = [g for g in grads if g not in out_grads]
        assert out_grads == [o + "_grad" for o in nd["outputs"]], grads
        assert state_grads == [s + "_seq_grad" for s in nd["states"]], grads
        odir = os.path.join(out, d, "run")
        cmd = [run_tool, os.path.join("lib", "Neurons", neuron + ".mlir"),
               "--neuron=" + neuron, "--variant=train",
               "--input=@" + os.path.join(out, inputs[x_name])]
        cmd += ["--state=@" + os.path.join(out, inits[a]) for a in init_names]
        cmd += ["--grad-output=@" + os.path.join(out, grads[g]) for g in out_grads]
        cmd += ["--grad-state=@" + os.path.join(out, grads[g])
                for g in state_grads]
        if soft:
            cmd.append("--param=soft_reset=true")
        if detach:
            cmd.append("--param=detach_reset=true")
        for pn, pv in runtime.items():
            cmd.append("--param=%s=%r" % (pn, float(pv)))
        cmd.append("--output-dir=" + odir)
        p = subprocess.run(cmd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        calls += 1
        if p.returncode != 0:
            sys.exit("flexsn-run failed (%d): %s\n%s"
                     % (p.returncode, " ".join(cmd), p.stdout))
        # flexsn-run's files -> the GPU kernels' argument names.
        names_of = {"out0.npy": nd["outputs"][0],
                    "grad_in0.npy": x_name + "_grad"}
        for i, s in enumerate(nd["states"]):
            names_of["state_seq%d.npy" % i] = s + "_seq"
            names_of["grad_init%d.npy" % i] = s + "_init_grad"
        for pn in runtime:
            names_of["grad_param_%s.npy" % pn] = pn + "_grad"
        got = sorted(os.listdir(odir))
        if got != sorted(names_of):
            sys.exit("flexsn-run wrote %s, expected %s" % (got, sorted(names_of)))
        res = {}
        for tf, arg in names_of.items():
            arr = np.load(os.path.join(odir, tf))
            if arg == nd["outputs"][0]:
                assert np.all((arr == 0) | (arr == 1)), tf
                arr = arr.astype(np.uint8)
            res[arg] = save("cpu_" + arg, arr)
            os.remove(os.path.join(odir, tf))
        os.rmdir(odir)
        entries.append(dict(
            neuron=neuron, gpu_neuron=neuron + suffix, reset=reset,
            soft_reset=soft, detach_reset=detach, dtype=dname, T=T, N=N,
            seed=seed, drive=dict(mean=mean, std=std), params=runtime,
            inputs=inputs, initial_states=inits, grads=grads, results=res))
index = dict(
    format="flexsn-cpu-train-results", version=1,
    note="CPU-path (flexsn-run --variant=train) forward values and gradients "
         "of L = <spike_grad, spike> + sum <state_seq_grad, state_seq> (no "
         "final-state gradient), on the stored seeded inputs; files named by "
         "the GPU kernels' argument names; spikes stored as uint8, parameter "
         "gradients as float32 scalars, the rest in the storage dtype; paths "
         "relative to the bundle folder",
    entries=entries)
json.dump(index, open(os.path.join(out, "cpu", "train_index.json"), "w"),
          indent=1)
print("    %d flexsn-run --variant=train calls" % calls)
EOF

# --- 5. bundle.json ----------------------------------------------------------
log "writing bundle.json"
"$PY" - "$DIR" "$ROOT" "$CHIP" "$CUDA_TOOLKIT" "${NEURONS[@]}" <<'EOF'
import json, os, subprocess, sys, time
out, root, chip, toolkit, names = sys.argv[1], sys.argv[2], sys.argv[3], \
    sys.argv[4], sys.argv[5:]
def git(*a):
    try:
        return subprocess.run(["git", "-C", root] + list(a),
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True).stdout.strip()
    except OSError:
        return ""
kernels = []
neurons = {}
for n in names:
    m = json.load(open(os.path.join(out, "manifests", n + ".json")))
    for nd in m["neurons"]:
        base, soft, detach = n, False, False
        if base.endswith("_detach"):
            base, detach = base[:-len("_detach")], True
        if base.endswith("_soft"):
            base, soft = base[:-len("_soft")], True
        variants = sorted({k["variant"].replace("-", "_")
                           for k in m["kernels"] if k["neuron"] == nd["name"]})
        neurons[nd["name"]] = dict(
            nd, soft_copy_of=(base if soft and not detach else None),
            copy_of=(base if soft or detach else None), soft_reset=soft,
            detach_reset=detach, variants=variants)
    for k in m["kernels"]:
        kernels.append(dict(name=k["name"], export="fx_" + k["name"],
                            neuron=k["neuron"],
                            variant=k["variant"].replace("-", "_"),
                            dtype=k["dtype"], manifest="manifests/%s.json" % n))
ptxas = subprocess.run([os.path.join(toolkit, "bin", "ptxas"), "--version"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                       text=True).stdout.strip().splitlines()
b = dict(format="flexsn-device-bundle", version=1,
         created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
         git_commit=git("rev-parse", "HEAD"),
         git_dirty=bool(git("status", "--porcelain", "--untracked-files=no")),
         chip=chip, ptxas=ptxas[-1] if ptxas else "",
         library="libflexsn_bundle.so", neurons=names,
         neuron_defs=neurons, kernels=kernels,
         statuses=json.load(open(os.path.join(out, "statuses.json"))),
         cpu_index="cpu/index.json", cpu_train_index="cpu/train_index.json",
         device_smoke="device_smoke" if os.path.exists(
             os.path.join(out, "device_smoke")) else None)
json.dump(b, open(os.path.join(out, "bundle.json"), "w"), indent=1)
print("    %d neurons, %d kernels, commit %s%s" % (
    len(names), len(kernels), b["git_commit"][:12], " (dirty)" if b["git_dirty"] else ""))
EOF

# --- 6. Size ------------------------------------------------------------------
BYTES=$(du -sb "$DIR" | cut -f1)
MIB=$(( (BYTES + 1048575) / 1048576 ))
echo "bundle: $DIR  $(du -sh "$DIR" | cut -f1) ($BYTES bytes; gpu $(du -sh "$DIR/gpu" | cut -f1), cpu $(du -sh "$DIR/cpu" | cut -f1), lib $(du -sh "$DIR/libflexsn_bundle.so" | cut -f1)) in $(( $(date +%s) - START )) s"
if [ "$MIB" -gt "$MAX_MIB" ]; then
  die "the bundle is ${MIB} MiB, over ${MAX_MIB} MiB"
fi
