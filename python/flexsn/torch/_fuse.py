"""`flexsn.torch.fuse(model)`: the chains batch norm -> FlexSN neuron ->
connection -> readout of an unmodified model, run as fused Blocks.

The model is traced with torch.fx, every module without children (and every
FlexSN neuron) kept as one call. In the graph, a chain is

    bn(x) -> [+ p] -> neuron -> [s + o | s * o | (1 - s) * o]
          -> [.mean(0) | .sum(0)]

where bn is a multi-step batch norm (a `_BatchNorm` whose `step_mode` is
"m", as SpikingJelly's layer.BatchNorm1d/2d/3d are: `[T, B, C, ...]`
inputs), or a single-step one on `[T*B, C, ...]` whose output reaches the
neuron through reshapes only (`.unflatten(0, (T, B))`, `.view(T, B,
...)`: checked at each call), the neuron a FlexSN neuron of one input and
one output in
multi-step mode, each link the only user of the one before, and o any
other tensor (SEW-ResNet's identity or downsampled identity, a residual),
p one too (Spiking-ResNet's identity, added before the neuron; a chain
has p or o, not both). Each chain becomes one call of `fused_block(bn,
neuron, x, o, ..., added=p)`, which
reads the two modules where the model keeps them: the returned model has
the same modules, parameters, buffers and state_dict keys, and its
neurons keep their states (`reset()`, SpikingJelly's `reset_net`). A
chain whose batch norm or neuron has hooks stays unfused (a block calls
neither module), checked again at each call.

A model (or submodule) torch.fx cannot trace symbolically (it branches on
or unpacks its inputs' shapes) is traced again at its first call with
each input signature, with those shapes (`_FuseAtCall`, `ShapeTracer`);
where that fails too, its children are fused instead.
"""

import collections
import copy
import functools
import inspect
import operator
from typing import List, Optional

import torch
from torch import fx, nn

from ._block import (
    BatchNorm,
    BlockShape,
    batch_norm_affine,
    check_block_neuron,
    compile_blocks,
    run_block,
)
from ._function import compiling
from ._guards import Guards, _same, attributes_restored, recording_reads
from ._kernels import DTYPES
from ._layout import memory_order
from ._shape_trace import call_signature, shape_trace
from ._modules import FlexSN

_ADDS = (operator.add, operator.iadd, torch.add)
_MULS = (operator.mul, operator.imul, torch.mul)


def fuse(model: nn.Module, verbose: bool = False) -> nn.Module:
    """The model with its batch norm -> neuron [-> connection] [-> mean or
    sum over T] chains run as fused Blocks (see the module's doc). Returns
    a torch.fx.GraphModule sharing `model`'s modules, `model` itself
    when nothing fused, or for a model that traces only at its calls a
    shallow copy that fuses at them; `model` is not changed. With
    `verbose`, prints
    what was fused and why each other batch norm or neuron was not."""
    report: List[str] = []
    blocks: List = []
    fused = _fuse_module(model, "", report, blocks, verbose)
    # Every block at once: one compile per neuron configuration.
    prepare(blocks)
    if verbose:
        print(
            "\n".join(_collapsed(report))
            if report
            else "flexsn.torch.fuse: no batch norm or FlexSN neuron found"
        )
    return fused


def _is_leaf(m: nn.Module) -> bool:
    """FlexSN neurons and modules without children stay single calls in a
    traced graph: it then shows the chains between modules."""
    return isinstance(m, FlexSN) or not any(True for _ in m.children())


class _Tracer(fx.Tracer):
    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return _is_leaf(m) or super().is_leaf_module(m, qualname)


class _FusedGraphModule(fx.GraphModule):
    """A fused module: its graph while the plain values its forward read
    when traced (its guards) are unchanged; else the unfused module's
    forward, on the same submodules, with the values as they are now."""

    def __call__(self, *args, **kwargs):
        guards = self.__dict__.get("_flexsn_guards")
        if guards and guards.changed(self) is not None:
            return self._flexsn_unfused()(*args, **kwargs)
        return super().__call__(*args, **kwargs)

    # A GraphModule pickles and deep-copies as a plain GraphModule: these
    # bring back the guarded one, with its guards and order.
    def __reduce__(self):
        return (_rebuild_fused, (super().__reduce__(), type(self).__name__))

    def __deepcopy__(self, memo):
        holder = nn.Module()
        holder.__dict__ = copy.deepcopy(self.__dict__, memo)
        return _fused_like(holder, type(self).__name__)

    def _flexsn_unfused(self) -> nn.Module:
        """The traced module's shallow copy (its submodules are this
        module's), given this module's mode, root attributes and
        buffers."""
        unfused = self._flexsn_unfused_copy[0]
        if unfused.training != self.training:
            unfused.train(self.training)
        for name, _ in self._flexsn_guards.root:
            setattr(unfused, name, getattr(self, name))
        for name in unfused._buffers:
            if name in self._buffers:
                unfused._buffers[name] = self._buffers[name]
        return unfused


def _fused_like(module: nn.Module, class_name: str) -> _FusedGraphModule:
    """A guarded fused module with `module`'s graph, attributes and
    order (`module` a GraphModule, or a holder of one's attributes)."""
    fused = _FusedGraphModule(
        module, module.__dict__["_graph"], class_name=class_name
    )
    for name, value in module.__dict__.items():
        if not hasattr(fused, name):
            fused.__dict__[name] = value
    _keep_order(fused, module)
    return fused


def _rebuild_fused(reduced, class_name: str) -> _FusedGraphModule:
    rebuild, args = reduced
    return _fused_like(rebuild(*args), class_name)


#: Attributes of a FlexSN neuron that change at every call: a forward that
#: reads one cannot be traced once.
_NEURON_STATES = frozenset(("v", "v_seq", "states", "state_seqs"))


class _Untraceable(Exception):
    """A module whose traced graph would not compute what it computes."""


def _trace(module: nn.Module, prefix: str, args=None):
    """(graph, guards): the traced graph and the plain values its forward
    read; raises _Untraceable when the graph cannot stand for it. With
    `args`, the graph of this call, traced with their shapes
    (ShapeTracer: valid for inputs of these shapes only)."""
    reads = {}
    if args is None:
        with attributes_restored(module), recording_reads(module, reads):
            graph = _Tracer().trace(module)
    else:
        graph = shape_trace(module, args, _is_leaf, reads)
    for m, name, _ in reads.values():
        if isinstance(m, FlexSN) and name in _NEURON_STATES:
            raise _Untraceable(
                f"not fused, its forward reads "
                f"{_paths(module, prefix)[id(m)]}.{name}, a neuron's state, "
                f"which a traced graph would keep at its value when traced"
            )
    return graph, Guards(module, reads)


def _collapsed(report: List[str]) -> List[str]:
    """The report's lines in order, each once: a chain a forward calls at
    every step of its own loop over T is named once, with its count."""
    counts = collections.Counter(report)
    return [
        line + (f" ({counts[line]} calls)" if counts[line] > 1 else "")
        for line in dict.fromkeys(report)
    ]


def _name_of(prefix: str) -> str:
    return prefix[:-1] or "model"


def _paths(module: nn.Module, prefix: str):
    """{id(submodule): its qualified name in the model}."""
    return {
        id(m): f"{prefix}{name}" if name else _name_of(prefix)
        for name, m in module.named_modules()
    }


def _fuse_module(
    module: nn.Module,
    prefix: str,
    report: List[str],
    blocks: List,
    verbose: bool = False,
):
    if _is_leaf(module):  # one call: no chain inside
        return module
    try:
        graph, guards = _trace(module, prefix)
    except Exception as error:  # noqa: BLE001: any trace failure
        why = (
            str(error)
            if isinstance(error, _Untraceable)
            else (
                f"torch.fx cannot trace it ({type(error).__name__}: "
                f"{str(error)[:120]})"
            )
        )
        if not any(True for _ in module.children()):
            return module
        at_call = not isinstance(error, _Untraceable)
        report.append(
            f"{_name_of(prefix)}: {why}; "
            + (
                "traced and fused at its first call with each input shape "
                "(else run with its children fused)"
                if at_call
                else "fusing inside its children"
            )
        )
        clone = None
        for name, child in module.named_children():
            new = _fuse_module(
                child, f"{prefix}{name}.", report, blocks, verbose
            )
            if new is not child:
                if clone is None:  # a shallow copy: `model` is unchanged
                    clone = _shallow_copy(module)
                clone._modules[name] = new
        if not at_call:
            return module if clone is None else clone
        holder = clone if clone is not None else _shallow_copy(module)
        # An instance attribute: nn.Module.__call__ calls it, and the
        # state_dict and submodules stay the module's.
        holder.forward = _FuseAtCall(module, holder, prefix, verbose)
        return holder
    found_report, found_blocks = [], []
    fused = _fused_module(
        module, graph, guards, prefix, found_report, found_blocks
    )
    if fused is None:
        report += found_report
        return module
    report += found_report
    blocks += found_blocks
    return fused


def _shallow_copy(module: nn.Module) -> nn.Module:
    """A copy of `module` with its own tables of parameters, buffers and
    submodules (the same objects): changing its tables leaves `module`
    as it is."""
    clone = copy.copy(module)
    for table in ("_parameters", "_buffers", "_modules"):
        setattr(clone, table, dict(getattr(module, table)))
    return clone


def _fused_module(
    module: nn.Module,
    graph: fx.Graph,
    guards: Guards,
    prefix: str,
    report: List[str],
    blocks: List,
):
    """The guarded GraphModule of `graph` (traced from `module`) with its
    chains fused, or None when none fused (or its state_dict would
    change); says in `report` what it fused and why not."""
    if not _fuse_graph(module, graph, prefix, report, blocks):
        return None
    graph.lint()
    fused = _FusedGraphModule(module, graph, class_name=type(module).__name__)
    _keep_order(fused, module)
    if guards:
        # The root's attributes the forward read live on the fused module,
        # where the caller sets them.
        # (One the fused module has already, a GraphModule's own, stays
        # where it is.)
        root = guards.root
        guards.root = [(n, v) for n, v in root if not hasattr(fused, n)]
        guards.inner += [(module, n, v) for n, v in root if hasattr(fused, n)]
        for name, _ in guards.root:
            setattr(fused, name, getattr(module, name))
        fused._flexsn_guards = guards
        fused._flexsn_unfused_copy = [_shallow_copy(module)]  # not a child
        report.append(
            f"{_name_of(prefix)}: its forward reads "
            f"{guards.describe(_paths(module, prefix))} as plain values; "
            f"while they keep their traced values it runs fused, else "
            f"unfused"
        )
    missing = set(module.state_dict()) ^ set(fused.state_dict())
    if missing:  # an attribute the forward never reads: keep the model
        report[:] = [
            f"{_name_of(prefix)}: not fused, its state_dict "
            f"would change ({', '.join(sorted(missing)[:4])})"
        ]
        del blocks[:]
        return None
    return fused


class _FuseAtCall:
    """The forward of a module that torch.fx cannot trace symbolically
    (it branches on or unpacks its inputs' shapes): at its first call with
    each input signature (shapes, dtypes, devices, mode), the original
    module is traced with those shapes and its chains fused; calls with
    that signature run that graph while the plain values it read keep
    their traced values (read from the module the caller holds, by path).
    Otherwise, and where the trace fails or fuses nothing, the module's
    own forward runs (its children fused where they could be); so does a
    signature first met under torch.compile, which traces a graph built
    here but not the building."""

    #: Input signatures traced per module: a model called with ever new
    #: shapes runs its own forward beyond these.
    LIMIT = 8
    _NOT_FUSED = object()

    def __init__(
        self, traced: nn.Module, holder: nn.Module, prefix: str, verbose: bool
    ):
        self.traced, self.holder = traced, holder
        self.prefix, self.verbose = prefix, verbose
        self.graphs = {}

    def __call__(self, *args, **kwargs):
        key = call_signature(self.holder, args, kwargs)
        entry = (
            self.graphs.get(key, self._NOT_FUSED)
            if key is not None
            else self._NOT_FUSED
        )
        if (
            key is not None
            and key not in self.graphs
            and len(self.graphs) < self.LIMIT
            # torch.compile cannot trace torch.fx's tracing: a signature
            # first met there runs unfused, and fuses at its first eager
            # call (docs/Python.md, fuse's "Limits").
            and not compiling()
        ):
            entry = self.graphs[key] = self._fuse(args)
        if entry is not self._NOT_FUSED:
            graph_module, guards = entry
            if self._unchanged(guards):
                graph_module.training = self.holder.training
                return graph_module(*args)
        return type(self.holder).forward(self.holder, *args, **kwargs)

    def _fuse(self, args):
        report, blocks = [], []
        try:
            graph, guards = _trace(self.traced, self.prefix, args)
        except Exception as error:  # noqa: BLE001: any trace failure
            report.append(
                f"{_name_of(self.prefix)}: not fused at its call "
                f"with shapes {[tuple(a.shape) for a in args]}: "
                f"{type(error).__name__}: {str(error)[:160]}"
            )
            fused = None
        else:
            fused = _fused_module(
                self.traced,
                graph,
                Guards(self.traced, {}),
                self.prefix,
                report,
                blocks,
            )
        if self.verbose:
            print(
                "\n".join(
                    [
                        f"flexsn.torch.fuse: {_name_of(self.prefix)} called "
                        f"with shapes {[tuple(a.shape) for a in args]}:"
                    ]
                    + ["  " + line for line in _collapsed(report)]
                )
            )
        if fused is None:
            return self._NOT_FUSED
        prepare(blocks)
        # Each read module by its path in the model (a module outside it
        # as itself).
        paths = _paths(self.traced, "")
        paths[id(self.traced)] = ""
        guards = [
            (paths.get(id(m), m), name, value)
            for m, name, value in [(self.traced, n, v) for n, v in guards.root]
            + guards.inner
        ]
        return fused, guards

    def _unchanged(self, guards) -> bool:
        """Whether the values the graph read are the traced ones, read
        from the module the caller holds (its submodules by path)."""
        for path, name, value in guards:
            try:
                module = (
                    path
                    if isinstance(path, nn.Module)
                    else self.holder.get_submodule(path)
                )
            except AttributeError:
                return False
            if not _same(value, getattr(module, name, None)):
                return False
        return True

    # Pickled and deep-copied without its graphs: a copy traces again.
    def __getstate__(self):
        state = dict(self.__dict__)
        state["graphs"] = {}
        return state

    def __deepcopy__(self, memo):
        new = copy.copy(self)
        new.traced = copy.deepcopy(self.traced, memo)
        new.holder = copy.deepcopy(self.holder, memo)
        new.graphs = {}
        return new


def _keep_order(new: nn.Module, old: nn.Module) -> None:
    """Orders the GraphModule's submodules, parameters and buffers (created
    in the order the graph uses them) as `old` has them: the same
    state_dict and `parameters()` order, so optimizers and checkpoints see
    the same model."""
    for table in ("_modules", "_parameters", "_buffers"):
        order = {name: i for i, name in enumerate(getattr(old, table))}
        items = sorted(
            getattr(new, table).items(),
            key=lambda item: order.get(item[0], len(order)),
        )
        getattr(new, table).clear()
        getattr(new, table).update(items)
    for name, child in new._modules.items():
        original = old._modules.get(name)
        if original is not None and child is not original:
            _keep_order(child, original)


def _module(root: nn.Module, node: fx.Node) -> Optional[nn.Module]:
    if node.op != "call_module":
        return None
    return root.get_submodule(node.target)


def _only_user(node: fx.Node) -> Optional[fx.Node]:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


def _is_call(node: fx.Node, functions, method: str) -> bool:
    return (node.op == "call_function" and node.target in functions) or (
        node.op == "call_method" and node.target == method
    )


def _connection(s: fx.Node):
    """(op, operand, nodes) when s's only user starts a SEW connection
    with another tensor o: s + o, s * o, or (1 - s) * o; else None."""
    user = _only_user(s)
    if user is None or user.kwargs or len(user.args) != 2:
        return None

    def other(node, value):
        a, b = node.args
        o = b if a is value else a if b is value else None
        return o if isinstance(o, fx.Node) and o is not value else None

    for op, functions, method in (
        ("add", _ADDS, "add"),
        ("and", _MULS, "mul"),
    ):
        if _is_call(user, functions, method):
            o = other(user, s)
            return (op, o, [user]) if o is not None else None
    # IAND: (1 - s) * o, as `1.0 - s` (operator.sub) or `torch.rsub(s, 1)`.
    one_minus = user.op == "call_function" and (
        (user.target is operator.sub and user.args == (1, s))
        or (user.target is torch.rsub and user.args == (s, 1))
    )
    mul = _only_user(user) if one_minus else None
    if (
        mul is None
        or mul.kwargs
        or len(mul.args) != 2
        or not _is_call(mul, _MULS, "mul")
    ):
        return None
    o = other(mul, user)
    return ("iand", o, [user, mul]) if o is not None else None


def _is_in_place_add(node: fx.Node) -> bool:
    return (node.op == "call_function" and node.target is operator.iadd) or (
        node.op == "call_method" and node.target == "add_"
    )


def _added(node: fx.Node, value: fx.Node) -> Optional[fx.Node]:
    """The other operand p when `node` is `value + p` (or `p + value`) of
    two tensors, the sum a new tensor or `value` itself (`value += p`,
    `value.add_(p)`: value, a batch norm's output, has no other reader);
    else None."""
    if node is None or node.kwargs or len(node.args) != 2:
        return None
    in_place = _is_in_place_add(node)
    if not (in_place or _is_call(node, (operator.add, torch.add), "add")):
        return None
    a, b = node.args
    other = (
        b if a is value else None if in_place else a if b is value else None
    )
    return other if isinstance(other, fx.Node) and other is not value else None


def _readout(y: fx.Node):
    """("sum" or "mean", node) when y's only user is its sum or mean over
    dim 0 (time); else None."""
    user = _only_user(y)
    if user is None or not user.args or user.args[0] is not y:
        return None
    for kind, function in (("sum", torch.sum), ("mean", torch.mean)):
        if _is_call(user, (function,), kind):
            break
    else:
        return None
    args = dict(zip(("dim", "keepdim"), user.args[1:]))
    args.update(user.kwargs)
    if (
        args.get("dim") not in (0, (0,), [0])
        or args.get("keepdim", False)
        or set(args) - {"dim", "keepdim"}
    ):
        return None
    return kind, user


_SHAPE_ATTRIBUTES = frozenset(("shape", "ndim"))


def _read_shape_from_input(bn_node: fx.Node) -> None:
    """Makes the nodes that read only the shape of a batch norm's output
    (`y.shape`, `y.size()`, `y.dim()`) read its input's, which has the
    same: they are then no users of the output that keep it from
    fusing."""
    if len(bn_node.args) != 1 or not isinstance(bn_node.args[0], fx.Node):
        return
    for user in list(bn_node.users):
        if (
            user.op == "call_function"
            and user.target is getattr
            and user.args[1:]
            and user.args[1] in _SHAPE_ATTRIBUTES
        ) or (user.op == "call_method" and user.target in ("size", "dim")):
            user.replace_input_with(bn_node, bn_node.args[0])


#: Methods and functions that only reinterpret a tensor's shape (row-major
#: order kept): a batch norm's [T*B, C, ...] output may pass through them
#: to its neuron's [T, B, C, ...] input.
_RESHAPE_METHODS = frozenset(
    ("view", "reshape", "unflatten", "flatten", "contiguous")
)
_RESHAPE_FUNCTIONS = frozenset(
    f
    for f in (torch.reshape, torch.flatten, getattr(torch, "unflatten", None))
    if f
)


def _reshapes(node: fx.Node) -> List[fx.Node]:
    """The reshapes that follow `node`, each the only user of the one
    before (whether they split T*B into T, B is checked at each call)."""
    found = []
    user = _only_user(node)
    while (
        user is not None
        and user.args
        and user.args[0] is node
        and (
            (user.op == "call_method" and user.target in _RESHAPE_METHODS)
            or (
                user.op == "call_function"
                and user.target in _RESHAPE_FUNCTIONS
            )
        )
    ):
        found.append(user)
        node, user = user, _only_user(user)
    return found


def _what_instead(root: nn.Module, node: Optional[fx.Node]) -> str:
    """What a batch norm's output goes to instead of a neuron: a clause
    for the report."""
    if node is None:
        return " (it has several users)"
    if node.op == "call_module":
        return f" (it goes to a {type(_module(root, node)).__name__})"
    if node.target is fused_block:
        return (
            " (it is the second input of a fused chain: "
            f"{_described('', node)}'s)"
        )
    if node.op in ("call_function", "call_method"):
        name = getattr(node.target, "__name__", node.target)
        after = _only_user(node)
        if (
            (name in ("add", "iadd", "add_") or node.target in _ADDS)
            and after is not None
            and isinstance(_module(root, after), FlexSN)
        ):
            return (
                " (it is added to something other than one tensor "
                "before the neuron: a block adds a tensor of its "
                "shape, without alpha, to the batch norm's output)"
            )
        return f" (it goes to {name})"
    return ""


#: A module's own hooks, by what a report calls them: a block runs the
#: batch norm and the neuron without calling either module.
_HOOK_KINDS = (
    ("_forward_pre_hooks", "forward pre-hooks"),
    ("_forward_hooks", "forward hooks"),
    ("_backward_pre_hooks", "backward pre-hooks"),
    ("_backward_hooks", "backward hooks"),
)


def _hooks(module: nn.Module) -> List[str]:
    """The kinds of hook registered on `module` (SpikingJelly's monitors
    register forward hooks on neurons)."""
    return [name for key, name in _HOOK_KINDS if getattr(module, key, None)]


def _why_not(bn: nn.Module, neuron, flat: bool = False) -> Optional[str]:
    """Why bn -> neuron cannot be one Block now; None when it can. `flat`:
    bn normalizes [T*B, C, ...], reshaped to [T, B, C, ...] for the
    neuron."""
    for what, module in (("batch norm", bn), ("neuron", neuron)):
        hooks = _hooks(module)
        if hooks:
            return (
                f"the {what} has {' and '.join(hooks)}, which a block "
                f"would not call"
            )
    if isinstance(bn, nn.SyncBatchNorm):
        return (
            "a SyncBatchNorm reduces its statistics across processes, "
            "which a block does not"
        )
    if not flat and getattr(bn, "step_mode", None) != "m":
        return (
            "the batch norm is not multi-step (step_mode='m'): it "
            "normalizes [N, C, ...], not [T, B, C, ...]"
        )
    try:
        check_block_neuron(neuron)
    except (TypeError, ValueError) as error:
        return str(error)
    if neuron.step_mode != "m":
        return "the neuron is single-step (step_mode='s')"
    if neuron.store_state_seqs or neuron.check_finite:
        return (
            "the neuron stores its state sequences or checks finite "
            "values, which a block does not"
        )
    if neuron._handle_options:
        chosen = ", ".join(f"{k}={v}" for k, v in neuron._handle_options)
        return (
            f"the neuron's kernels are chosen by compile options "
            f"({chosen}), which a block does not compile"
        )
    return None


def _fuse_graph(
    root: nn.Module,
    graph: fx.Graph,
    prefix: str,
    report: List[str],
    blocks: List,
) -> bool:
    """Replaces each chain in `graph` by a `fused_block` call; says in
    `report` what it fused and why other batch norms were not, and adds
    each (neuron, block shape) to `blocks`."""
    fused = False
    for bn_node in list(graph.nodes):
        if not isinstance(_module(root, bn_node), BatchNorm):
            continue
        _read_shape_from_input(bn_node)
        where = f"{prefix}{bn_node.target}"
        bn = _module(root, bn_node)
        flat = getattr(bn, "step_mode", None) != "m"
        reshapes = _reshapes(bn_node)
        last = reshapes[-1] if reshapes else bn_node
        sn_node = _only_user(last)
        # Spiking-ResNet's bn(x) + identity before the neuron.
        added = _added(sn_node, last)
        adds = [sn_node] if added is not None else []
        if adds:
            last, sn_node = sn_node, _only_user(sn_node)
        neuron = _module(root, sn_node) if sn_node is not None else None
        if (
            not isinstance(neuron, FlexSN)
            or len(bn_node.args) != 1
            or sn_node.args != (last,)
            or sn_node.kwargs
        ):
            report.append(
                f"{where}: not fused, its output is not the only "
                f"input of a FlexSN neuron" + _what_instead(root, sn_node)
            )
            continue
        if reshapes and not flat:
            report.append(
                f"{where}: not fused, a multi-step batch norm "
                f"whose output is reshaped before its neuron"
            )
            continue
        why = _why_not(bn, neuron, flat and bool(reshapes))
        if why:
            report.append(
                f"{where} -> {prefix}{sn_node.target}: not fused, " f"{why}"
            )
            continue
        chain = [bn_node, *reshapes, *adds, sn_node]
        connection, operand = "none", None
        # A block has one skip input: the added one, or the connection's.
        found = None if adds else _connection(sn_node)
        if found:
            connection, operand, nodes = found
            chain += nodes
        readout = _readout(chain[-1])
        if readout:
            readout, node = readout
            chain.append(node)
        # The chain runs where its last node was: a module of it called in
        # between (shared) would see its calls reordered, and a tensor
        # changed in place in between would be read changed.
        shared = {bn_node.target, sn_node.target}
        if _moved_past(root, chain, shared):
            chain = chain[: 2 + len(reshapes) + len(adds)]
            connection, operand, readout = "none", None, None
            why = _moved_past(root, chain, shared)
            if why:
                report.append(f"{where}: not fused, {why}")
                continue
        last = chain[-1]
        with graph.inserting_before(last):
            x = flat_x = bn_node.args[0]
            # A batch norm on [T*B, C, ...]: the block takes its input with
            # the same reshapes its output had, [T, B, C, ...].
            for node in reshapes:
                x = graph.node_copy(
                    node,
                    lambda arg, prev=node.args[0], new=x: new
                    if arg is prev
                    else arg,
                )
            kwargs = {"connection": connection, "readout": readout or "none"}
            if reshapes:
                kwargs["flat"] = flat_x
            if adds:
                kwargs["added"] = added
                kwargs["add_in_place"] = _is_in_place_add(adds[0])
            args = (
                graph.get_attr(bn_node.target),
                graph.get_attr(sn_node.target),
                x,
                operand,
            )
            call = graph.call_function(fused_block, args, kwargs)
        last.replace_all_uses_with(call)
        for node in reversed(chain):
            graph.erase_node(node)
        parts = [where + (" (over [T*B, ...])" if reshapes else "")]
        if adds:
            parts.append(f"+ {_described(prefix, added)}")
        parts.append(f"{prefix}{sn_node.target}")
        if connection != "none":
            parts.append(f"{connection} with {_described(prefix, operand)}")
        if readout:
            parts.append(f"{readout} over T")
        report.append("fused: " + " -> ".join(parts))
        blocks.append(
            (
                neuron,
                _shape(
                    connection,
                    operand is not None,
                    readout or "none",
                    adds=bool(adds),
                ),
            )
        )
        fused = True
    return fused


def _described(prefix: str, node: fx.Node) -> str:
    """A chain's second input as the report names it: the module or the
    fused chain's neuron it comes from, else its graph node."""
    if node.op == "call_module":
        return f"{prefix}{node.target}"
    if node.target is fused_block and node.args[1].op == "get_attr":
        return f"{prefix}{node.args[1].target}"
    return node.name


def _moved_past(
    root: nn.Module, chain: List[fx.Node], targets
) -> Optional[str]:
    """Why the chain cannot run where its last node is: a node between its
    first and last nodes, other than the chain's own, calls one of the
    modules `targets` or may change a tensor in place; None when none
    does."""
    node = chain[0].next
    while node is not chain[-1]:
        if node not in chain:
            if node.op == "call_module" and node.target in targets:
                return "its module is called again before its neuron"
            if _changes_in_place(root, node):
                return (
                    f"{node.name} may change a tensor in place between "
                    f"the batch norm and the neuron's last use"
                )
        node = node.next
    return None


_IN_PLACE_OPERATORS = frozenset(
    (
        operator.iadd,
        operator.isub,
        operator.imul,
        operator.itruediv,
        operator.ifloordiv,
        operator.imod,
        operator.ipow,
        operator.iand,
        operator.ior,
        operator.ixor,
        operator.ilshift,
        operator.irshift,
        operator.imatmul,
        operator.setitem,
    )
)


def _changes_in_place(root: nn.Module, node: fx.Node) -> bool:
    """Whether `node` may write to a tensor it is given: an in-place
    operator or method (`x += y`, `x.mul_(2)`), a function called with
    `inplace=True`, a module whose `inplace` is true (nn.ReLU(inplace=
    True)). A leaf module that writes its input by other means is not
    seen."""
    if node.op == "call_method":
        return node.target.endswith("_") and not node.target.endswith("__")
    if node.op == "call_module":
        return (
            getattr(root.get_submodule(node.target), "inplace", False) is True
        )
    if node.op != "call_function":
        return False
    target = node.target
    name = getattr(target, "__name__", "")
    if target in _IN_PLACE_OPERATORS or (
        name.endswith("_") and not name.endswith("__")
    ):
        return True
    if node.kwargs.get("inplace") is True:
        return True
    try:
        names = list(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        return False
    at = names.index("inplace") if "inplace" in names else len(node.args)
    return at < len(node.args) and node.args[at] is True


#: The blocks built in this process: {(the compiled neuron's directory,
#: which names its configured source, shape, storage type, targets):
#: BlockProgram}.
_PROGRAMS = {}


@functools.lru_cache(maxsize=None)
def _shape(
    connection: str,
    skip: bool,
    readout: str,
    normalized_apart: bool = False,
    adds: bool = False,
) -> BlockShape:
    """The block of a fused chain: the batch norm as a channel affine (or
    nothing, when it runs apart), plus the added tensor (`adds`), the
    connection with its skip operand, a mean as a sum (then divided).
    Memoized: every call of a chain asks."""
    pre = "none" if normalized_apart else "channel_affine"
    if adds:
        pre = "add" if normalized_apart else pre + "_add"
    return BlockShape(
        pre,
        connection,
        "skip" if skip else "input",
        "none" if readout == "none" else "sum",
    )


def _key(neuron, shape: BlockShape, dtype: str):
    targets = getattr(neuron, "targets", None)
    return (
        str(neuron.compiled.directory),
        shape,
        dtype,
        None if targets is None else tuple(targets),
    )


def _name(shape: BlockShape) -> str:
    return "fused_" + "_".join(
        v
        for v in (shape.pre, shape.connection, shape.operand, shape.readout)
        if v not in ("none", "input")
    )


def prepare(blocks, dtype: str = "f32") -> None:
    """Compiles the blocks `blocks` ([(neuron, BlockShape)]) take in
    `dtype`, one compile per neuron configuration: what fuse does ahead
    of the first call (float32), and a first call in another dtype does
    for its own block."""
    groups = {}
    for neuron, shape in blocks:
        group = groups.setdefault(
            _key(neuron, shape, dtype)[::3], (neuron, {})
        )
        group[1][_name(shape)] = shape
    for neuron, shapes in groups.values():
        if all(
            _key(neuron, shape, dtype) in _PROGRAMS
            for shape in shapes.values()
        ):
            continue
        # The whole set, whatever this process loaded before: the same
        # model is then the same source (a cache entry that a machine
        # without the tools finds).
        # In name order, whatever order the model uses them in.
        shapes = dict(sorted(shapes.items()))
        programs = compile_blocks(
            neuron.compiled, shapes, (dtype,), getattr(neuron, "targets", None)
        )
        for name, shape in shapes.items():
            _PROGRAMS[_key(neuron, shape, dtype)] = programs[name]


def _program(neuron, shape: BlockShape, dtype: str):
    key = _key(neuron, shape, dtype)
    if key not in _PROGRAMS:
        prepare([(neuron, shape)], dtype)
    return _PROGRAMS[key]


def fused_block(
    bn: nn.Module,
    neuron,
    x: torch.Tensor,
    operand: Optional[torch.Tensor] = None,
    *,
    connection: str = "none",
    readout: str = "none",
    flat: Optional[torch.Tensor] = None,
    added: Optional[torch.Tensor] = None,
    add_in_place: bool = False,
):
    """`readout(connection(neuron(bn(x) [+ added]), operand))` as one
    Block call, with bn's and the neuron's parameters, statistics and
    states (bn
    apart, then the rest as one Block, where `_normalizes_apart` says);
    the same modules called one by one when an input does not suit the
    kernels (a broadcast or non-tensor operand, a dtype they do not store,
    a mode changed since `fuse`, an empty batch). `flat`: bn is a
    single-step batch norm whose input is `flat` [T*B, C, ...]; x is
    `flat` reshaped to [T, B, C, ...] as bn's output was, which the block
    normalizes alike (the same statistics over T*B and the rest).
    `add_in_place`: the model adds `added` in place (`y += p`: y keeps
    its dtype), which the modules one by one do too."""
    dtype = DTYPES.get(x.dtype)
    mean = readout == "mean"
    # Under torch.compile the modules one by one: the neuron's step is then
    # PyTorch operations (_torch_step) that Inductor fuses with the batch
    # norm and the connection, where a block would be an opaque op whose
    # batch statistics break the graph.
    fits = not compiling() and (
        dtype is not None
        and x.dim() >= 3
        and x.numel() > 0
        and (flat is None or _splits_time(flat, x))
        and _why_not(bn, neuron, flat is not None) is None
        and (readout == "none" or dtype == "f32")
        and _like(operand, x)
        and _like(added, x)
    )
    if not fits:
        return _unfused(
            bn,
            neuron,
            x,
            operand,
            connection,
            readout,
            flat,
            added,
            add_in_place,
        )
    if _normalizes_apart(bn, x):
        return _neuron_block(
            bn, neuron, x, operand, connection, readout, dtype, flat, added
        )
    program = _program(
        neuron,
        _shape(
            connection, operand is not None, readout, adds=added is not None
        ),
        dtype,
    )
    scale, shift, statistics = batch_norm_affine(bn, x)
    skip = operand if added is None else added
    y = run_block(
        program,
        neuron,
        bn,
        x,
        skip,
        scale,
        shift,
        neuron.states,
        neuron._assigned,
        statistics,
    )
    return y / x.shape[0] if mean else y


def _like(tensor: Optional[torch.Tensor], x: torch.Tensor) -> bool:
    """Whether a block's second input may be `tensor`: none, or a tensor
    of x's shape, dtype and device (not broadcast, not promoted)."""
    return tensor is None or (
        isinstance(tensor, torch.Tensor)
        and tensor.shape == x.shape
        and tensor.dtype == x.dtype
        and tensor.device == x.device
    )


def _normalizes_apart(bn: nn.Module, x: torch.Tensor) -> bool:
    """Whether bn runs as its own module, before a block of the neuron and
    the connection: for batch statistics of a CUDA input in a dense layout
    other than row-major (channels-last). There cuDNN's NHWC batch norm,
    forward and backward, takes less GPU time than the fused block's
    statistics, per-channel gradient sums and statistics backward; in
    row-major the fused block is the faster (docs/perf/resnet)."""
    return (
        x.is_cuda
        and (bn.training or bn.running_mean is None)
        and memory_order(x.shape, x.stride()) is not None
    )


def _splits_time(flat: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether x, a reshape of flat [T*B, C, ...], is [T, B, C, ...]: its
    first two dimensions split flat's first, its third is flat's
    channels (the dimensions after C may be regrouped)."""
    return (
        x.dim() >= 3
        and flat.dim() >= 2
        and x.numel() == flat.numel()
        and x.shape[0] * x.shape[1] == flat.shape[0]
        and x.shape[2] == flat.shape[1]
    )


def _normalized(bn, x, flat):
    """bn's output, shaped as x: bn(x), or bn(flat) reshaped as x is."""
    return bn(x) if flat is None else bn(flat).reshape(x.shape)


def _neuron_block(
    bn, neuron, x, operand, connection, readout, dtype, flat=None, added=None
):
    """bn(x), then the addition, the neuron, the connection and the
    readout as one Block (or the neuron alone when there is none)."""
    y = _normalized(bn, x, flat)
    if connection == "none" and readout == "none" and added is None:
        return neuron(y)
    shape = _shape(
        connection, operand is not None, readout, True, added is not None
    )
    y = run_block(
        _program(neuron, shape, dtype),
        neuron,
        None,
        y,
        operand if added is None else added,
        None,
        None,
        neuron.states,
        neuron._assigned,
    )
    return y / x.shape[0] if readout == "mean" else y


def _unfused(
    bn,
    neuron,
    x,
    operand,
    connection,
    readout,
    flat=None,
    added=None,
    add_in_place=False,
):
    y = _normalized(bn, x, flat)
    if added is not None:
        y = y.add_(added) if add_in_place else y + added
    s = neuron(y)
    if connection == "add":
        s = s + operand
    elif connection == "and":
        s = s * operand
    elif connection == "iand":
        s = (1.0 - s) * operand
    if readout == "sum":
        return s.sum(0)
    return s.mean(0) if readout == "mean" else s
