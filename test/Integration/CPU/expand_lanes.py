#!/usr/bin/env python3
"""Writes the MLIR module of expand-lanes.test to stdout: for every per-step
op (flexsn.spike, flexsn.round to f16/bf16, nearest and other, and
flexsn.surrogate_grad of every surrogate), the op on a vector of 8 points
and on each point alone, and a count of the lanes whose bits differ, which
main prints."""

SURROGATES = [
    "sigmoid",
    "atan",
    "piecewise_quadratic",
    "piecewise_exp",
    "soft_sign",
    "super_spike",
    "erf",
    "nonzero_sign_log_abs",
    "piecewise_leaky_relu<w = 0.5, c = 0.1>",
    "squarewave_fourier_series<n = 3>",
    "s2nn",
    "q_pseudo_spike<alpha = 3.0>",
    "leaky_k_relu<leak = 0.1, k = 2.0>",
    "fake_numerical_gradient",
    "log_tailed_relu<alpha = 0.2>",
    "rect<alpha = 2.0>",
    "straight_through",
]
# Below, at and above 0, and in the surrogates' tails.
POINTS = [-2.5, -0.75, -0.25, 0.0, 0.1, 0.5, 1.0, 3.0]


def main():
    ops = [
        "flexsn.surrogate_grad {} surrogate(#flexsn.%s)" % s
        for s in SURROGATES
    ]
    ops.append("flexsn.spike {} surrogate(#flexsn.sigmoid)")
    for t in ("f16", "bf16"):
        ops.append("flexsn.round {} to %s" % t)
        ops.append("flexsn.round {} to %s other" % t)
    b = [
        "func.func @main() {",
        "  %%lanes = arith.constant dense<[%s]> : vector<8xf32>"
        % ", ".join("%.6e" % p for p in POINTS),
        "  %zero = arith.constant 0 : index",
        "  %one = arith.constant 1 : index",
        "  %count0 = arith.constant 0 : index",
    ]
    count = "%count0"
    for i, op in enumerate(ops):
        b.append("  %%v%d = %s : vector<8xf32>" % (i, op.format("%lanes")))
        for j in range(len(POINTS)):
            k = "%d_%d" % (i, j)
            b += [
                "  %%e%s = vector.extract %%lanes[%d] : f32 from "
                "vector<8xf32>" % (k, j),
                "  %%s%s = %s : f32" % (k, op.format("%e" + k)),
                "  %%l%s = vector.extract %%v%d[%d] : f32 from "
                "vector<8xf32>" % (k, i, j),
                "  %%bs%s = arith.bitcast %%s%s : f32 to i32" % (k, k),
                "  %%bl%s = arith.bitcast %%l%s : f32 to i32" % (k, k),
                "  %%ne%s = arith.cmpi ne, %%bs%s, %%bl%s : i32" % (k, k, k),
                "  %%a%s = arith.select %%ne%s, %%one, %%zero : index"
                % (k, k),
                "  %%c%s = arith.addi %s, %%a%s : index" % (k, count, k),
            ]
            count = "%c" + k
    b += [
        "  %%n = arith.index_cast %s : index to i64" % count,
        '  vector.print str "differing lanes: "',
        "  vector.print %n : i64",
        "  return",
        "}",
    ]
    print("\n".join(b))


if __name__ == "__main__":
    main()
