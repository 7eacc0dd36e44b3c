#!/usr/bin/env bash
# Builds, on this (GPU-less) machine, everything the device machine needs to
# check and benchmark the GPU kernels (see /work/shared/DEVICE.md):
#
#   bash utils/gpu_bundle.sh [DIR]          DIR defaults to .device
#
# Into DIR (git-ignored; at most ~60 MiB so that it fits the device tool's
# `carry`):
#   gpu/<neuron>.{gpu.mlir,h,cubin}   flexsn-opt --flexsn-lower-to-nvvm, then
#                                     flexsn-translate --flexsn-to-{header,cubin}
#                                     for every lib/Neurons/*.mlir, plus a
#                                     <neuron>_soft copy (soft_reset = true,
#                                     generated into src/) of each neuron that
#                                     has a soft_reset flag;
#   manifests/<neuron>.json           flexsn-translate --flexsn-to-manifest;
#   bundle.c, libflexsn_bundle.so     a C shim including every header and
#                                     exporting fx_<neuron>_<variant>_<dtype>
#                                     (same parameters as the header's
#                                     flexsn_<...> function), compiled with
#                                     lib/Runtime/flexsn_runtime.c; loads
#                                     libcuda with dlopen (no -lcuda);
#   cpu/...npy, cpu/index.json        CPU-path results (build/bin/flexsn-run) on
#                                     seeded random inputs, for every neuron x
#                                     {inference, final-state} x {f32, f16} x
#                                     T in {0, 1, 16, 64} x N in {1, 1000},
#                                     hard reset, plus soft reset at T = 16; the
#                                     inputs are stored too (spikes as uint8);
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
log "compiling neurons for $CHIP"
NEURONS=()
compile_neuron() { # compile_neuron FILE NAME
  local file=$1 name=$2 t0 t1
  t0=$(date +%s.%N)
  "$OPT" "$file" "--flexsn-lower-to-nvvm=chip=$CHIP toolkit=$CUDA_TOOLKIT" \
    -o "$DIR/gpu/$name.gpu.mlir"
  "$TRANSLATE" --flexsn-to-header "$DIR/gpu/$name.gpu.mlir" -o "$DIR/gpu/$name.h"
  "$TRANSLATE" --flexsn-to-manifest "$DIR/gpu/$name.gpu.mlir" \
    -o "$DIR/manifests/$name.json"
  "$TRANSLATE" --flexsn-to-cubin "$DIR/gpu/$name.gpu.mlir" -o "$DIR/gpu/$name.cubin"
  t1=$(date +%s.%N)
  NEURONS+=("$name")
  printf '    %-16s %6.2f s  cubin %7d bytes\n' "$name" \
    "$(echo "$t1 - $t0" | bc)" "$(stat -c %s "$DIR/gpu/$name.cubin")"
}
for file in lib/Neurons/*.mlir; do
  name=$(sed -n 's/^ *flexsn\.neuron @\([A-Za-z0-9_]*\).*/\1/p' "$file" | head -n 1)
  [ -n "$name" ] || die "$file defines no flexsn.neuron"
  compile_neuron "$file" "$name"
  # The GPU pipeline specializes const parameters to their defaults, so a
  # soft-reset kernel needs a copy of the neuron whose soft_reset defaults to
  # true (its name gets a _soft suffix).
  if grep -q '%soft_reset: i1 = false' "$file"; then
    sed -e "s/flexsn\.neuron @$name\b/flexsn.neuron @${name}_soft/" \
        -e 's/%soft_reset: i1 = false/%soft_reset: i1 = true/' \
        "$file" >"$DIR/src/${name}_soft.mlir"
    compile_neuron "$DIR/src/${name}_soft.mlir" "${name}_soft"
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
READ = ("input_sequence", "initial_state")
lines = [
    "/* Generated by utils/gpu_bundle.sh. Do not edit.",
    " * Includes every FlexSN header and exports one non-static wrapper per",
    " * kernel function, fx_<neuron>_<variant>_<dtype>, with the parameters of",
    " * the header's static inline flexsn_<neuron>_<variant>_<dtype>. */",
    "#include <stdbool.h>",
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
                const = "const " if role in READ else ""
                params.append("%s%s *%s" % (const, CTYPE[a["dtype"]], a["name"]))
            args.append(a["name"])
        lines.append("flexsn_status fx_%s(%s) {" % (k["name"], ", ".join(params)))
        lines.append("  return %s(%s);" % (fn, ", ".join(args)))
        lines.append("}")
        count += 1
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
# Input drive x ~ normal(mean, std) and initial states ~ uniform(lo, hi), as
# in test/Integration/CPU/check_neurons.py: many neurons spike, none runs away.
DRIVE = {"if": (0.6, 0.8), "lif": (0.8, 0.9), "plif": (0.8, 0.9),
         "qif": (0.5, 0.6), "eif": (0.6, 0.8), "izhikevich": (0.6, 0.6),
         "cuba_lif": (0.3, 0.6)}
# With a soft reset the quadratic / exponential neurons can run away after a
# large input: a milder drive (as in utils/device_check.py).
DRIVE_SOFT = {"qif": (0.4, 0.4), "eif": (0.4, 0.4), "izhikevich": (0.4, 0.4)}
INIT = {"v": (-0.2, 0.9), "w": (-0.2, 0.3), "c": (-0.3, 0.5)}
# Runtime (trainable) parameters: a non-default value, so that it matters.
RUNTIME_PARAMS = {"w": 0.5}

base = [n for n in names if not n.endswith("_soft")]
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
        neurons[nd["name"]] = dict(nd, soft_copy_of=(n[:-5] if n.endswith("_soft") else None))
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
         cpu_index="cpu/index.json",
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
