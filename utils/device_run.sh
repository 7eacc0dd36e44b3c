#!/usr/bin/env bash
# The one command to run on the device machine (from the repository root,
# with the folder built here by utils/gpu_bundle.sh carried along):
#
#   bash utils/device_run.sh .device "$OUT"
#
# The machine has no FlexSN tools: flexsn.compile serves the kernels from the
# folder's cache (FLEXSN_CACHE_DIR=<folder>/cache) and launches them through
# FLEXSN_RUNTIME_LIB (<folder>/libflexsn_runtime.so, else the build's).
#
# Steps, each with a time limit, all inside a total budget (default 470 s,
# FLEXSN_DEVICE_BUDGET; the benchmark keeps FLEXSN_BENCH_RESERVE = 235 s of
# it) so that the whole run ends well inside the GPU runner's 10-minute
# limit:
#   1. env          GPU, driver, python / torch versions
#   2. smoke        the runtime's device smoke test (bundle/device_smoke), if built
#   2b. examples    examples/consumer's CPU and GPU programs (bundle/examples:
#                   CMake against the installed package, and the single-file
#                   header with plain gcc), each checking LIF against its
#                   formula
#   3. check        python/tests/kernel_checks.py (full): every inference /
#                   final-state kernel vs PyTorch and the CPU kernels, absent
#                   buffers, strides, misalignment, bad arguments
#                                                            -> $OUT/check/
#   4. train        python/tests/train_kernel_checks.py (full): every training
#                   forward/backward pair vs PyTorch autograd and the CPU
#                   kernels, T = 0, NULL gradients, strides, misalignment, a
#                   too-small workspace                      -> $OUT/train/
#   4b. channels / bits  python/tests/channel_kernel_checks.py and
#                   bit_spike_checks.py (and --quick under memcheck, and
#                   initcheck for bits)
#   5. memcheck     compute-sanitizer --tool memcheck on kernel_checks.py --quick
#   6. trainmem     compute-sanitizer --tool memcheck on train_kernel_checks.py
#                   --quick (a subset of the neurons)
#   7. racecheck    compute-sanitizer --tool racecheck on a smaller --quick
#   8. initcheck    compute-sanitizer --tool initcheck on a smaller --quick
#   8b. trainrace / trainsync  compute-sanitizer --tool racecheck / synccheck
#                   on train_kernel_checks.py --quick for PLIF (the
#                   deterministic reduction's shared memory and barriers)
#   9. pytest       python -m pytest -m cuda python/tests: the tests that need
#                   a GPU (test_cuda_kernels.py: every check group per neuron;
#                   the PyTorch layer on CUDA tensors). The others need the
#                   FlexSN tools and run where those are.
#  10. bench        python3 -m bench lif (inference, final state, training
#                   forward + backward)                      -> $OUT/bench/
# Every step's output is tee'd to $OUT/<step>.log; a short summary table
# comes last (also in $OUT/summary.txt). Exits non-zero if a check failed.
# Brought back (the GPU runner returns at most 8 files): summary.txt,
# bench_results.{json,md}, bench_plot.png, bench_train.png,
# check_results.json, train_results.json and all.tar.gz (everything).
set -uo pipefail
cd "$(dirname "$0")/.."

BUNDLE=${1:-.device}
OUT=${2:-${OUT:-device-out}}
PY=${PYTHON:-python3}
TOTAL=${FLEXSN_DEVICE_BUDGET:-470}
BENCH_RESERVE=${FLEXSN_BENCH_RESERVE:-235}
export PYTHONDONTWRITEBYTECODE=1
export PYTHONUNBUFFERED=1

mkdir -p "$OUT"
T0=$(date +%s)
if [ ! -f "$BUNDLE/bundle.json" ] || [ ! -d "$BUNDLE/cache" ]; then
  echo "device_run: no bundle at $BUNDLE: run 'bash utils/gpu_bundle.sh' on the" \
       "build machine and carry the folder" | tee "$OUT/summary.txt"
  exit 2
fi
BUNDLE=$(cd "$BUNDLE" && pwd)
export FLEXSN_CACHE_DIR=$BUNDLE/cache
# The cached CPU kernels' OpenMP runtime (this machine has no LLVM).
export LD_LIBRARY_PATH=$BUNDLE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
if [ -z "${FLEXSN_RUNTIME_LIB:-}" ]; then
  if [ -f "$BUNDLE/libflexsn_runtime.so" ]; then
    export FLEXSN_RUNTIME_LIB=$BUNDLE/libflexsn_runtime.so
  else
    export FLEXSN_RUNTIME_LIB=$(pwd)/build/lib/Runtime/libflexsn_runtime.so
  fi
fi

declare -A RC SECS
STEPS=()
left() { echo $((TOTAL - ($(date +%s) - T0))); }
min() { if [ "$1" -lt "$2" ]; then echo "$1"; else echo "$2"; fi; }

# run_step NAME LIMIT COMMAND... : runs with a time limit, logs, records rc.
run_step() {
  local name=$1 limit=$2 start rc
  shift 2
  STEPS+=("$name")
  if [ "$limit" -lt 10 ]; then
    echo "==> $name: skipped (time budget)" | tee "$OUT/$name.log"
    RC[$name]=skipped
    SECS[$name]=0
    return
  fi
  echo "==> $name (limit ${limit} s): $*"
  start=$(date +%s)
  timeout -k 10 "$limit" "$@" 2>&1 | tee "$OUT/$name.log"
  rc=${PIPESTATUS[0]}
  SECS[$name]=$(($(date +%s) - start))
  [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && echo "==> $name: TIMED OUT after ${limit} s" | tee -a "$OUT/$name.log"
  RC[$name]=$rc
}

# 1. Environment.
run_step env 30 bash -c "nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv 2>&1;
  $PY -c 'import sys, numpy; print(\"python\", sys.version.split()[0], \"numpy\", numpy.__version__)';
  $PY -c 'import torch; print(\"torch\", torch.__version__, \"cuda\", torch.version.cuda, torch.cuda.get_device_name(0))' 2>&1 | tail -n 1;
  $PY -c 'import cupy; print(\"cupy\", cupy.__version__)' 2>&1 | tail -n 1;
  command -v compute-sanitizer || echo 'compute-sanitizer: not on PATH';
  $PY -c 'import json; b = json.load(open(\"$BUNDLE/bundle.json\")); print(\"bundle commit\", b[\"git_commit\"], \"dirty\" if b[\"git_dirty\"] else \"\", b[\"created\"], b[\"cache_entries\"], \"cache entries\")';
  echo \"FLEXSN_CACHE_DIR=$FLEXSN_CACHE_DIR FLEXSN_RUNTIME_LIB=$FLEXSN_RUNTIME_LIB\""

# 2. The runtime's device smoke test.
if [ -x "$BUNDLE/device_smoke" ]; then
  run_step smoke "$(min 45 $(($(left) - BENCH_RESERVE - 200)))" "$BUNDLE/device_smoke"
fi

# 2b. examples/consumer's programs, built as users build them: each checks
# LIF against its formula (the GPU ones on this GPU).
if [ -d "$BUNDLE/examples" ]; then
  run_step examples 60 bash -c "set -e; for p in consumer consumer_gpu lif_gpu; do echo \"== \$p\"; \"$BUNDLE/examples/\$p\"; done"
fi

# 3. Full correctness check of the inference / final-state kernels.
lim=$(min 120 $(($(left) - BENCH_RESERVE - 160)))
run_step check "$lim" "$PY" python/tests/kernel_checks.py \
  --out "$OUT/check" --deadline $((lim - 20))

# 4. Full correctness check of the training kernels.
lim=$(min 150 $(($(left) - BENCH_RESERVE - 80)))
run_step train "$lim" "$PY" python/tests/train_kernel_checks.py \
  --out "$OUT/train" --deadline $((lim - 20))

# 5-8. compute-sanitizer on the PyTorch-free quick checks.
lim=$(min 60 $(($(left) - BENCH_RESERVE - 80)))
run_step channels "$lim" "$PY" python/tests/channel_kernel_checks.py \
  --out "$OUT/channels"
lim=$(min 60 $(($(left) - BENCH_RESERVE - 80)))
run_step bits "$lim" "$PY" python/tests/bit_spike_checks.py --out "$OUT/bits"

if command -v compute-sanitizer >/dev/null; then
  lim=$(min 60 $(($(left) - BENCH_RESERVE - 70)))
  run_step channelmem "$lim" compute-sanitizer --tool memcheck \
    --error-exitcode 99 "$PY" python/tests/channel_kernel_checks.py --quick \
    --out "$OUT/channelmem"
  # The bits kernels' byte stores: nothing out of bounds, nothing read that
  # was not written (the partial groups' read-modify-write).
  for step in bitsmem:memcheck bitsinit:initcheck; do
    lim=$(min 60 $(($(left) - BENCH_RESERVE - 70)))
    run_step "${step%%:*}" "$lim" compute-sanitizer --tool "${step#*:}" \
      --error-exitcode 99 "$PY" python/tests/bit_spike_checks.py --quick \
      --out "$OUT/${step%%:*}"
  done
  lim=$(min 80 $(($(left) - BENCH_RESERVE - 60)))
  run_step memcheck "$lim" compute-sanitizer --tool memcheck \
    --error-exitcode 99 "$PY" python/tests/kernel_checks.py --quick \
    --allow-skip --out "$OUT/memcheck" --deadline $((lim - 20))
  lim=$(min 80 $(($(left) - BENCH_RESERVE - 40)))
  run_step trainmem "$lim" compute-sanitizer --tool memcheck \
    --error-exitcode 99 "$PY" python/tests/train_kernel_checks.py --quick \
    --allow-skip \
    --neurons lif,plif,izhikevich,cuba_lif,qif,lif_soft,plif_detach,izhikevich_soft_detach \
    --out "$OUT/trainmem" --deadline $((lim - 20))
  lim=$(min 50 $(($(left) - BENCH_RESERVE - 20)))
  run_step racecheck "$lim" compute-sanitizer --tool racecheck \
    --error-exitcode 99 "$PY" python/tests/kernel_checks.py --quick \
    --allow-skip --neurons lif,izhikevich,cuba_lif_soft \
    --out "$OUT/racecheck" --deadline $((lim - 15))
  lim=$(min 50 $(($(left) - BENCH_RESERVE)))
  run_step initcheck "$lim" compute-sanitizer --tool initcheck \
    --error-exitcode 99 "$PY" python/tests/kernel_checks.py --quick \
    --allow-skip --neurons lif,plif,izhikevich \
    --out "$OUT/initcheck" --deadline $((lim - 15))
  for step in trainrace:racecheck trainsync:synccheck; do
    lim=$(min 60 $(($(left) - BENCH_RESERVE)))
    run_step "${step%%:*}" "$lim" compute-sanitizer --tool "${step#*:}" \
      --error-exitcode 99 "$PY" python/tests/train_kernel_checks.py --quick \
      --allow-skip --neurons plif \
      --out "$OUT/${step%%:*}" --deadline $((lim - 15))
  done
else
  echo "==> compute-sanitizer is not on PATH: sanitizer steps skipped"
fi

# 9. The pytest tests that need a GPU (the rest run where the tools are).
lim=$(min 150 $(($(left) - BENCH_RESERVE)))
run_step pytest "$lim" "$PY" -m pytest -q -p no:cacheprovider -m cuda \
  python/tests

# 10. Benchmark (its budget: rows, then waiting for the torch.compile
# workers; the end-of-run copy and the plots come after it).
lim=$(min 260 $(($(left) - 5)))
run_step bench "$lim" "$PY" -m bench lif \
  --out "$OUT/bench" --budget $((lim - 35))

# Summary table.
STEP_INFO=""
for s in "${STEPS[@]}"; do STEP_INFO+="$s=${RC[$s]}:${SECS[$s]} "; done
"$PY" - "$OUT" "$STEP_INFO" "$(( $(date +%s) - T0 ))" <<'EOF' | tee "$OUT/summary.txt"
import json, os, re, sys
out, info, total = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
steps = {}
for item in info:
    name, rest = item.split("=", 1)
    rc, secs = rest.split(":")
    steps[name] = (rc, int(secs))

def log(name):
    try:
        return open(os.path.join(out, name + ".log"), errors="replace").read()
    except OSError:
        return ""

def last(pattern, text):
    m = re.findall(pattern, text, re.M)
    return m[-1] if m else None

lines = []
bad = False
def add(name, ok, what):
    global bad
    rc, secs = steps.get(name, ("-", 0))
    state = "skipped" if rc == "skipped" else ("PASS" if ok else "FAIL")
    if state == "FAIL":
        bad = True
    lines.append("%-10s %-7s %4ds  %s" % (name, state, secs, what))

for name in ("env", "smoke", "examples", "check", "train", "channels", "channelmem",
             "bits", "bitsmem", "bitsinit", "memcheck", "trainmem", "racecheck", "initcheck", "trainrace",
             "trainsync", "pytest", "bench"):
    if name not in steps:
        continue
    rc, secs = steps[name]
    text = log(name)
    timed_out = rc in ("124", "137")
    if name == "env":
        dev = last(r"^torch .*$", text) or "?"
        lines.append("%-10s %-7s %4ds  %s" % (name, "info", secs, dev))
        continue
    if name == "smoke":
        fails = len(re.findall(r"^FAIL", text, re.M))
        add(name, rc == "0", "rc %s%s; %s" % (rc, " (timed out)" if timed_out else "",
                                             (text.strip().splitlines() or ["no output"])[-1][:90]))
        continue
    if name == "examples":
        runs = re.findall(r"^(?:CPU|GPU): (\d+) spikes, (\d+) wrong$", text, re.M)
        ok = rc == "0" and len(runs) == 3 and all(
            int(n) > 0 and w == "0" for n, w in runs)
        add(name, ok, "%d of 3 programs checked LIF with 0 wrong" % sum(
            int(n) > 0 and w == "0" for n, w in runs))
        continue
    if name in ("channels", "channelmem", "bits", "bitsmem", "bitsinit"):
        summ = last(r"^\d+ of \d+ passed.*$", text) or "no summary"
        if name in ("channelmem", "bitsmem", "bitsinit"):
            summ = "%s; %s" % (last(r"ERROR SUMMARY: .*$", text) or
                               "no sanitizer summary", summ)
        add(name, rc == "0", ("TIMED OUT; " if timed_out else "") + summ)
        for l in re.findall(r"^FAIL .*$", text, re.M)[:12]:
            lines.append("           " + l[:150])
        continue
    if name in ("check", "train", "memcheck", "trainmem", "racecheck",
                "initcheck", "trainrace", "trainsync"):
        prog = "train_kernel_checks" if name.startswith("train") \
            else "kernel_checks"
        summ = last(r"^%s: \d+ passed, \d+ failed.*$" % prog, text) or \
            "no summary"
        what = summ
        if name not in ("check", "train"):
            err = last(r"ERROR SUMMARY: .*$", text) or \
                last(r"RACECHECK SUMMARY: .*$", text) or "no sanitizer summary"
            what = "%s; %s" % (err, summ.replace(prog + ": ", ""))
        if timed_out:
            what = "TIMED OUT; " + what
        add(name, rc == "0", what)
        if name in ("check", "train"):
            all_lines = text.splitlines()
            fails = [i for i, l in enumerate(all_lines) if l.startswith("FAIL ")]
            for i in fails[:12]:
                lines.append("           " + all_lines[i][:110])
                if i + 1 < len(all_lines) and all_lines[i + 1].startswith("     "):
                    lines.append("             " + all_lines[i + 1].strip()[:150])
            if len(fails) > 12:
                lines.append("           ... %d more failing groups (%s.log)"
                             % (len(fails) - 12, name))
        continue
    if name == "pytest":
        summ = last(r"^=*\s*\d+ (?:passed|failed|skipped|deselected|error).*$",
                    text) or "no summary"
        add(name, rc == "0", ("TIMED OUT; " if timed_out else "") +
            summ.strip("= "))
        fails = re.findall(r"^(?:FAILED|ERROR) .*$", text, re.M)
        for l in fails[:12]:
            lines.append("           " + l[:150])
        if len(fails) > 12:
            lines.append("           ... %d more (pytest.log)"
                         % (len(fails) - 12))
        continue
    if name == "bench":
        path = os.path.join(out, "bench", "results.json")
        ok = rc == "0"
        if not os.path.exists(path):
            add(name, False, "no results (rc %s)" % rc)
            continue
        doc = json.load(open(path))
        meta, rows = doc["meta"], doc["rows"]
        add(name, ok, "%d rows, copy %.0f GB/s, %s" % (
            len(rows), meta["copy_gbs"],
            "see bench_results.md, bench_plot.png, bench_train.png"))
        lines.append("")
        lines.append("  N=2^24        dtype  T   FlexSN ms  %copy  %stream  x eager  x compile")
        for r in rows:
            if r["N"] != 1 << 24 or "flexsn_ms" not in r:
                continue
            def f(v, spec):
                return "-" if v is None else format(v, spec)
            lines.append("  %-12s  %-5s %3d  %9.3f  %5.1f  %7s  %7s  %9s" % (
                r["variant"], r["dtype"], r["T"], r["flexsn_ms"],
                100 * r["frac_copy"],
                f(r.get("frac_stream") and 100 * r["frac_stream"], ".1f"),
                f(r.get("speedup_eager"), ".2f"),
                f(r.get("speedup_compile"), ".2f")))
        small = [r for r in rows if r["N"] != 1 << 24 and "flexsn_ms" in r]
        if small:
            worst = min(small, key=lambda r: r.get("speedup_compile") or 1e9)
            lines.append("  N<=2^20: %d rows; FlexSN %.1f%%-%.1f%% of copy; "
                         "lowest x compile %s (%s %s T=%d N=2^%d)" % (
                             len(small),
                             100 * min(r["frac_copy"] for r in small),
                             100 * max(r["frac_copy"] for r in small),
                             "-" if worst.get("speedup_compile") is None
                             else "%.2f" % worst["speedup_compile"],
                             worst["variant"], worst["dtype"], worst["T"],
                             worst["N"].bit_length() - 1))
print("")
print("== FlexSN device run: %s in %d s (logs and results in %s) =="
      % ("FAILED" if bad else "all passed", total, out))
for l in lines:
    print(l)
sys.exit(1 if bad else 0)
EOF
status=${PIPESTATUS[0]}

# The GPU runner brings back at most 8 files, two folders deep: keep the
# benchmark's results, the checks' results and the summary at the top (7
# files), everything else in one archive (the 8th).
if [ -d "$OUT/bench" ]; then
  for pair in results.json:bench_results.json results.md:bench_results.md \
              bench.png:bench_plot.png bench_train.png:bench_train.png; do
    [ -f "$OUT/bench/${pair%%:*}" ] && cp "$OUT/bench/${pair%%:*}" "$OUT/${pair#*:}"
  done
fi
[ -f "$OUT/check/results.json" ] && cp "$OUT/check/results.json" "$OUT/check_results.json"
[ -f "$OUT/train/results.json" ] && cp "$OUT/train/results.json" "$OUT/train_results.json"
(cd "$OUT" && tar czf all.tar.gz --exclude=all.tar.gz -- * 2>/dev/null)
find "$OUT" -mindepth 1 -maxdepth 1 ! -name 'bench_*' ! -name 'check_results.json' \
  ! -name 'train_results.json' ! -name summary.txt ! -name all.tar.gz \
  -exec rm -rf {} +
exit "$status"
