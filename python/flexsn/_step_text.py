"""The MLIR text of an imported step function: the one place `flexsn.fx`
writes IR.

`BodyWriter` writes a neuron body one op per line (unique SSA names, each
constant once, bools promoted to f32 as torch does), and `neuron_text`
puts it under its `flexsn.neuron` header. The importer (`flexsn.fx`) only
decides which op each traced torch call becomes. Every construct written
here is read back by `flexsn-opt` in `python/tests/test_fx.py`
(`test_every_text_round_trips_through_the_parser`).
"""

import dataclasses
import math
import numbers
import re
import struct

from .surrogate import _format_float


@dataclasses.dataclass(frozen=True)
class Value:
    ssa: str
    type: str  # "f32" or "i1"


class Unsupported(Exception):
    """Raised while writing an op: the reason, which the importer turns
    into an UnsupportedOpError naming the op."""


def f32_literal(value):
    """An f32 attribute's text: decimal, or the bit pattern where the value
    is not finite in f32 (also for doubles beyond f32's range)."""
    value = float(value)
    try:
        bits = struct.pack("<f", value)
    except OverflowError:  # finite double beyond f32: torch rounds to inf
        bits = struct.pack("<f", math.copysign(math.inf, value))
    f = struct.unpack("<f", bits)[0]
    if math.isfinite(f):
        return f32_text(f)
    return "0x%08X" % struct.unpack("<I", bits)[0]


def f32_text(value):
    """The shortest decimal that rounds to the same f32 as `value`."""
    bits = struct.pack("<f", value)
    for digits in range(1, 10):
        text = "%.*g" % (digits, value)
        try:
            if struct.pack("<f", float(text)) == bits:
                return _format_float(float(text))
        except OverflowError:  # rounded past f32's largest value
            continue
    return _format_float(value)


def mlir_string(text):
    return '"%s"' % text.replace("\\", "\\\\").replace('"', '\\"')


class BodyWriter:
    """Writes the body: one MLIR op per line, SSA names unique."""

    def __init__(self, used_names):
        self.lines = []
        self.used = set(used_names)
        self.constants = {}
        self.loc = ""
        self.i1_as_f32 = {}

    def fresh(self, hint):
        hint = re.sub(r"[^A-Za-z0-9_]", "_", hint or "v") or "v"
        if hint[0].isdigit():
            hint = "v" + hint
        name, i = hint, 0
        while name in self.used:
            i += 1
            name = "%s_%d" % (hint, i)
        self.used.add(name)
        return name

    def locate(self, filename, line=0):
        """Ops written next are located at `filename`:`line` (none with
        `filename` None)."""
        self.loc = (
            " loc(%s:%d:0)" % (mlir_string(filename), line)
            if filename is not None
            else ""
        )

    def emit(self, text, type_, hint):
        name = self.fresh(hint)
        self.lines.append("  %%%s = %s%s" % (name, text, self.loc))
        return Value(name, type_)

    def const(self, value, type_="f32"):
        if type_ == "i1":
            key = ("i1", bool(value))
            text = "arith.constant %s" % ("true" if value else "false")
            hint = "true" if value else "false"
        else:
            literal = f32_literal(value)
            key = ("f32", literal)
            text = "arith.constant %s : f32" % literal
            hint = "cst"
        if key not in self.constants:
            name = self.fresh(hint)
            self.lines.append("  %%%s = %s" % (name, text))
            self.constants[key] = Value(name, type_)
        return self.constants[key]

    # Typed operand access -------------------------------------------------

    def f32(self, value):
        """An f32 operand: a bool is 1.0/0.0 (as torch promotes it)."""
        if isinstance(value, Value):
            if value.type == "f32":
                return value
            if value not in self.i1_as_f32:
                self.i1_as_f32[value] = self.emit(
                    "arith.select %%%s, %%%s, %%%s : f32"
                    % (value.ssa, self.const(1.0).ssa, self.const(0.0).ssa),
                    "f32",
                    value.ssa + "_f",
                )
            return self.i1_as_f32[value]
        if isinstance(value, bool):
            return self.const(1.0 if value else 0.0)
        if isinstance(value, numbers.Real):
            return self.const(float(value))
        raise Unsupported("operand %r is not a scalar value" % (value,))

    def i1(self, value):
        if isinstance(value, Value):
            if value.type == "i1":
                return value
            raise Unsupported(
                "needs a bool condition (a comparison or an "
                "i1 parameter), got a float value"
            )
        if isinstance(value, bool):
            return self.const(value, "i1")
        raise Unsupported("needs a bool condition, got %r" % (value,))

    # Op builders -------------------------------------------------------------

    def binary(self, op, a, b, hint):
        a, b = self.f32(a), self.f32(b)
        return self.emit(
            "arith.%s %%%s, %%%s : f32" % (op, a.ssa, b.ssa), "f32", hint
        )

    def unary(self, op, a, hint):
        a = self.f32(a)
        return self.emit("%s %%%s : f32" % (op, a.ssa), "f32", hint)

    def cmp(self, predicate, a, b, hint):
        a, b = self.f32(a), self.f32(b)
        return self.emit(
            "arith.cmpf %s, %%%s, %%%s : f32" % (predicate, a.ssa, b.ssa),
            "i1",
            hint,
        )

    def select(self, cond, a, b, hint):
        cond = self.i1(cond)
        if all(
            isinstance(v, Value) and v.type == "i1" or isinstance(v, bool)
            for v in (a, b)
        ):
            a, b, type_ = self.i1(a), self.i1(b), "i1"
        else:
            a, b, type_ = self.f32(a), self.f32(b), "f32"
        return self.emit(
            "arith.select %%%s, %%%s, %%%s : %s"
            % (cond.ssa, a.ssa, b.ssa, type_),
            type_,
            hint,
        )

    def powf(self, a, b, hint):
        a, b = self.f32(a), self.f32(b)
        return self.emit(
            "math.powf %%%s, %%%s : f32" % (a.ssa, b.ssa), "f32", hint
        )

    def spike(self, x, surrogate, hint):
        """`flexsn.spike` of `x` with `surrogate`, an attribute's text."""
        x = self.f32(x)
        return self.emit(
            "flexsn.spike %%%s surrogate(%s) : f32" % (x.ssa, surrogate),
            "f32",
            hint,
        )

    def logical(self, op, a, b, hint):
        a, b = self.i1(a), self.i1(b)
        return self.emit(
            "arith.%s %%%s, %%%s : i1" % (op, a.ssa, b.ssa), "i1", hint
        )


def param_text(p):
    if p.type == "i1":
        default = "true" if p.default else "false"
    else:
        default = f32_text(float(p.default))
    kind = "" if p.kind == "const" else " " + p.kind
    shape = "" if p.shape == "scalar" else " " + p.shape
    return "%%%s: %s = %s%s%s" % (p.name, p.type, default, kind, shape)


def neuron_text(
    name,
    input_names,
    state_names,
    output_names,
    params,
    body: "BodyWriter",
    yielded,
    comment: str,
) -> str:
    """The `flexsn.neuron @name` of `body`'s ops yielding `yielded` (the
    outputs, then the new states), its parameters `params` (with `name`,
    `type`, `default`, `kind` and `shape`), after a `// comment` line."""
    header = "flexsn.neuron @%s inputs(%s)" % (
        name,
        ", ".join("%%%s: f32" % n for n in input_names),
    )
    if state_names:
        header += " states(%s)" % ", ".join(
            "%%%s: f32" % n for n in state_names
        )
    header += " outputs(%s)" % ", ".join(output_names)
    if params:
        header += "\n    params(%s)" % ", ".join(param_text(p) for p in params)
    lines = ["// " + comment, header + " {"] + body.lines
    if yielded:
        lines.append(
            "  flexsn.yield %s : %s"
            % (
                ", ".join("%" + v.ssa for v in yielded),
                ", ".join(v.type for v in yielded),
            )
        )
    else:
        lines.append("  flexsn.yield")
    lines.append("}")
    return "\n".join(lines) + "\n"
