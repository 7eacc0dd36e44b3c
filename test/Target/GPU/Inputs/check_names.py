#!/usr/bin/env python3
"""Every name the verifier accepts gives a header that compiles.

    check_names.py WORKDIR TOOLKIT RUNTIME_INCLUDE

Tries each name below as an input, a state, an output and a runtime i1
parameter of a neuron (flexsn-opt alone): it must be accepted or rejected as
the table says, a rejection being one error naming it. Then it puts every
accepted name in each role (and as a trainable per-neuron f32 parameter)
into one module, lowers it for the GPU with every variant, and compiles the
header as C99 (-pedantic), as GNU C and as C++17, every warning an error.
Prints one line per failure and exits 1 if there was any.
"""

import concurrent.futures
import pathlib
import subprocess
import sys

# name -> whether it is accepted. Near misses of the rejected ones are
# accepted: the rules reject what the header cannot hold, nothing more.
NAMES = {
    # The stubs' arguments and locals.
    "stream": False,
    "T": False,
    "N": False,
    "ld": False,
    "C": False,
    "S": False,
    "workspace": False,
    "kinds": False,
    "element_sizes": False,
    "desc": False,
    "buffers": False,
    "scalars": False,
    "saved_stride": False,
    "workspace_bytes": False,
    "t": True,
    "n": True,
    "c": True,
    "s1": True,
    "lda": True,
    "streams": True,
    "stream_": True,
    "workspace1": True,
    "kind": True,
    "descr": True,
    "buffer": True,
    "scalar": True,
    # Macros: the headers', the compilers' and the C library's.
    "NULL": False,
    "SIZE_MAX": False,
    "INT32_MAX": False,
    "UINT_LEAST16_WIDTH": False,
    "INTPTR_MIN": False,
    "EXIT_SUCCESS": False,
    "CU_LAUNCH_PARAM_END": False,
    "CUDA_VERSION": False,
    "RAND_MAX": False,
    "BIG_ENDIAN": False,
    "WNOHANG": False,
    "I": False,
    "linux": False,
    "unix": False,
    "errno": False,
    "complex": False,
    "noreturn": False,
    "null": True,
    "Null": True,
    "Linux": True,
    "V_th": True,
    "A": True,
    "X1": True,
    "GLOBAL_W": True,
    "INT32": True,
    "SIZE": True,
    "delta_T": True,
    "cuStreamQuery": True,
    "offsetof": True,
    "exit": True,
    "abs": True,
    # Reserved identifiers and the headers' own names.
    "_Bool": False,
    "_X": False,
    "__x": False,
    "flexsn_launch": False,
    "flexsn": False,
    "FLEXSN_BIT_PACKED": False,
    "Flexsn_y": False,
    "_x": True,
    "x_": True,
    "flex_sn": True,
    # `_` itself is fine, but its buffers' names (`__grad`, `__init`) are
    # reserved.
    "_": False,
    # Types the stubs name.
    "size_t": False,
    "uintptr_t": False,
    "int8_t": False,
    "uint16_t": False,
    "int32_t": False,
    "int64_t": False,
    "CUstream": False,
    "x_t": True,
    "size": True,
    "int8": True,
    "uint": True,
    # Keywords of C, C++ and Python.
    "int": False,
    "bool": False,
    "true": False,
    "xor": False,
    "constexpr": False,
    "alignof": False,
    "None": False,
    "finally": False,
    "not_eq": False,
    "wchar_t": False,
    "integer": True,
    "xor1": True,
    "none": True,
}

SURROGATE = "#flexsn.sigmoid<alpha = 4.0>"


def neuron(role, names):
    """A neuron with `names` as its inputs, states, outputs or parameters
    (the other roles named in0, st0, out0)."""
    inputs, states, outputs, params = ["in0"], ["st0"], ["out0"], []
    if role == "input":
        inputs = names
    elif role == "state":
        states = names
    elif role == "output":
        outputs = names
    else:
        params = names
    # h = sum of inputs and states (+ each f32 parameter); outputs and new
    # states are spike(h) and h (selected by each i1 parameter).
    body, h = [], "%" + inputs[0]
    for i, name in enumerate(inputs[1:] + states):
        body.append(f"  %h{i} = arith.addf {h}, %{name} : f32")
        h = f"%h{i}"
    if role == "param_f32":
        for i, name in enumerate(params):
            body.append(f"  %p{i} = arith.mulf {h}, %{name} : f32")
            h = f"%p{i}"
    if role == "param_i1":
        for i, name in enumerate(params):
            body.append(
                f"  %p{i} = arith.select %{name}, {h}, " f"%{inputs[0]} : f32"
            )
            h = f"%p{i}"
    body.append(f"  %spike = flexsn.spike {h} surrogate({SURROGATE}) : f32")
    yields = ["%spike"] * len(outputs) + [h] * len(states)
    body.append(
        "  flexsn.yield "
        + ", ".join(yields)
        + " : "
        + ", ".join(["f32"] * len(yields))
    )
    sig = "inputs(" + ", ".join(f"%{x}: f32" for x in inputs) + ")"
    sig += " states(" + ", ".join(f"%{v}: f32" for v in states) + ")"
    sig += " outputs(" + ", ".join(outputs) + ")"
    if role == "param_f32":
        sig += (
            " params("
            + ", ".join(
                f"%{p}: f32 = 1.0 trainable per_neuron" for p in params
            )
            + ")"
        )
    elif role == "param_i1":
        sig += (
            " params("
            + ", ".join(f"%{p}: i1 = true runtime" for p in params)
            + ")"
        )
    return (
        f"flexsn.neuron @names_{role} {sig} {{\n" + "\n".join(body) + "\n}\n"
    )


def run(argv, **kwargs):
    return subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, **kwargs
    )


def main():
    work, toolkit, runtime_include = map(pathlib.Path, sys.argv[1:4])
    work.mkdir(parents=True, exist_ok=True)
    failures = []
    roles = ["input", "state", "output", "param_i1"]

    def check(job):
        name, role = job
        path = work / f"{role}-{name}.mlir"
        path.write_text(neuron(role, [name]))
        p = run(["flexsn-opt", path, "-o", "/dev/null"])
        accepted = p.returncode == 0
        if accepted != NAMES[name]:
            return (
                f"{name} as {role}: "
                f"{'accepted' if accepted else 'rejected'}, expected "
                f"{'accepted' if NAMES[name] else 'rejected'} "
                f"{p.stderr.strip()}"
            )
        errors = [line for line in p.stderr.splitlines() if "error:" in line]
        if not accepted and (len(errors) != 1 or f"'{name}" not in errors[0]):
            return (
                f"{name} as {role}: expected one error naming it, "
                f"got {p.stderr!r}"
            )
        return None

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        jobs = [(name, role) for name in NAMES for role in roles]
        failures += [f for f in pool.map(check, jobs) if f]

    accepted = [name for name, ok in NAMES.items() if ok]
    module = work / "accepted.mlir"
    module.write_text(
        "".join(neuron(role, accepted) for role in roles + ["param_f32"])
    )
    header = work / "names.h"
    lowered = run(
        [
            "flexsn-opt",
            module,
            "--flexsn-lower-to-nvvm=variants=inference,final-state,"
            f"forward,backward storage-types=f32 toolkit={toolkit}",
        ]
    )
    if lowered.returncode:
        failures.append(
            "lowering the accepted names failed: " + lowered.stderr
        )
    else:
        p = run(
            ["flexsn-translate", "--flexsn-to-header", "-o", header],
            input=lowered.stdout,
        )
        if p.returncode:
            failures.append("--flexsn-to-header failed: " + p.stderr)
    if header.exists():
        source = work / "use_names.c"
        source.write_text('#include "names.h"\nint main(void) { return 0; }\n')
        includes = [
            f"-I{work}",
            f"-I{runtime_include}",
            f"-I{toolkit / 'include'}",
        ]
        for compiler in (
            ["cc", "-std=c99", "-pedantic", "-x", "c"],
            ["cc", "-x", "c"],
            ["c++", "-std=c++17", "-x", "c++"],
        ):
            p = run(
                compiler[:1]
                + ["-Wall", "-Wextra", "-Werror", "-fsyntax-only"]
                + includes
                + compiler[1:]
                + [source]
            )
            if p.returncode:
                failures.append(
                    " ".join(compiler) + ": the header does not "
                    "compile:\n" + p.stderr[:4000]
                )
        # Every accepted name is an argument of some stub.
        text = header.read_text()
        failures += [
            f"{name} is no argument of the header's stubs"
            for name in accepted
            if f" {name}," not in text
            and f" *{name}," not in text
            and f" {name})" not in text
            and f" *{name})" not in text
        ]
    for failure in failures:
        print(failure)
    print(
        f"{len(NAMES)} names, {len(accepted)} accepted, "
        f"{len(failures)} failure(s)"
    )
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
