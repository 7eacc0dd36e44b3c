"""A NIR graph as a trainable PyTorch model (`from_nir`): FlexSN neurons
for NIR's neurons, PyTorch layers for the rest, run over [T, B, ...]
sequences. docs/NIR.md says how each primitive is discretized."""

import collections
import math
from typing import Dict, List, Union

import numpy as np
import torch
from torch import nn

import flexsn
from flexsn import nir
from flexsn.fx import Runtime, Trainable

from ._delay import Delay
from ._modules import FlexSN
from ._recurrent import Recurrent, coupled_scan, runs_coupled

_CHANNEL = "per_channel"


# -- NIR's neurons as FlexSN step functions ----------------------------------
# Forward Euler with step dt: `tau` is NIR's tau in steps (tau / dt), `r`
# NIR's r (times dt for the integrators, whose equation has no tau). The
# spike is FlexSN's H(h - v_threshold), 1 where h >= v_threshold (NIR: >);
# the reset is hard. Dividing by tau as FlexSN's LIF does makes a LIFNode
# exported by to_nir compute, bit for bit, what it computed.


def _p(kind=Trainable):
    return kind(0.0, shape=_CHANNEL)


def nir_lif(
    x, v, tau=_p(), r=_p(), v_leak=_p(), v_threshold=_p(), v_reset=_p(Runtime)
):
    h = v + ((v_leak - v) + r * x) / tau
    s = flexsn.spike(h - v_threshold)
    return s, s * v_reset + (1.0 - s) * h


def nir_if(x, v, r=_p(), v_threshold=_p(), v_reset=_p(Runtime)):
    h = v + r * x
    s = flexsn.spike(h - v_threshold)
    return s, s * v_reset + (1.0 - s) * h


def nir_li(x, v, tau=_p(), r=_p(), v_leak=_p()):
    h = v + ((v_leak - v) + r * x) / tau
    return h, h


def nir_i(x, v, r=_p()):
    h = v + r * x
    return h, h


def nir_cuba_lif(
    x,
    i,
    v,
    tau_syn=_p(),
    tau_mem=_p(),
    w_in=_p(),
    r=_p(),
    v_leak=_p(),
    v_threshold=_p(),
    v_reset=_p(Runtime),
):
    # The membrane integrates the synaptic current of the previous step.
    i_next = i + (w_in * x - i) / tau_syn
    h = v + ((v_leak - v) + r * i) / tau_mem
    s = flexsn.spike(h - v_threshold)
    return s, i_next, s * v_reset + (1.0 - s) * h


def nir_cuba_li(
    x, i, v, tau_syn=_p(), tau_mem=_p(), w_in=_p(), r=_p(), v_leak=_p()
):
    i_next = i + (w_in * x - i) / tau_syn
    h = v + ((v_leak - v) + r * i) / tau_mem
    return h, i_next, h


def _neuron_values(node: nir.Node, dt: float) -> Dict[str, np.ndarray]:
    """The step's parameter values of a NIR neuron node."""
    p = {
        name: np.asarray(value, np.float64)
        for name, value in node.params.items()
    }
    kind = node.type
    names = {
        "LIF": ("tau", "r", "v_leak", "v_threshold", "v_reset"),
        "LI": ("tau", "r", "v_leak"),
        "IF": ("r", "v_threshold", "v_reset"),
        "I": ("r",),
        "CubaLIF": (
            "tau_syn",
            "tau_mem",
            "w_in",
            "r",
            "v_leak",
            "v_threshold",
            "v_reset",
        ),
        "CubaLI": ("tau_syn", "tau_mem", "w_in", "r", "v_leak"),
    }[kind]
    values = {name: p[name] for name in names}
    for name in ("tau", "tau_syn", "tau_mem"):
        if name in values:
            values[name] = values[name] / dt  # in steps
    if kind in ("IF", "I"):
        values["r"] = values["r"] * dt
    return values


def _nir_values(
    kind: str, values: Dict[str, np.ndarray], dt: float
) -> Dict[str, np.ndarray]:
    """NIR's parameters from a step's (the inverse of _neuron_values)."""
    values = dict(values)
    for name in ("tau", "tau_syn", "tau_mem"):
        if name in values:
            values[name] = values[name] * dt
    if kind in ("IF", "I"):
        values["r"] = values["r"] / dt
    return values


_STEPS = {
    "LIF": (nir_lif, 1),
    "IF": (nir_if, 1),
    "LI": (nir_li, 1),
    "I": (nir_i, 1),
    "CubaLIF": (nir_cuba_lif, 2),
    "CubaLI": (nir_cuba_li, 2),
}


#: The nodes that keep a state from one step to the next (a cycle's, run
#: step by step, carry it from one call to the next): the neurons and
#: Delay. Before the first step each gives zero.
_STATEFUL = tuple(_STEPS) + ("Delay",)


class NIRNeuron(nn.Module):
    """A NIR neuron layer: a FlexSN neuron over [T, B, C, S], the C
    channels those of its parameters (one per neuron, or one for all) and
    S the rest of each sample."""

    def __init__(self, node: nir.Node, dt: float, where: str):
        super().__init__()
        values = _neuron_values(node, dt)
        for name, value in values.items():
            if not np.all(np.isfinite(value)):
                raise nir.NIRError(
                    f"node {where!r} ({node.type}): {name} " f"is not finite"
                )
            if name.startswith("tau") and not np.all(value > 0):
                raise nir.NIRError(
                    f"node {where!r} ({node.type}): {name} "
                    f"must be positive"
                )
            if name.startswith("tau") and not np.all(value >= 1):
                # Forward Euler's factor 1 - dt/tau would be negative: the
                # state would flip sign at every step.
                raise nir.NIRError(
                    f"node {where!r} ({node.type}): {name} = "
                    f"{np.min(value) * dt:g} s is shorter than dt = {dt:g} "
                    f"s (forward Euler needs dt <= {name}): is dt right?"
                )
        sizes = {value.size for value in values.values()} - {1}
        if len(sizes) > 1:
            raise nir.NIRError(
                f"node {where!r} ({node.type}): its "
                f"parameters differ in size {sorted(sizes)}"
            )
        self.channels = sizes.pop() if sizes else 1
        step, states = _STEPS[node.type]
        self.neuron = FlexSN(
            step, num_inputs=1, num_states=states, num_channels=self.channels
        )
        self.names = tuple(values)
        with torch.no_grad():
            for name, value in values.items():
                flat = torch.as_tensor(value.reshape(-1), dtype=torch.float32)
                getattr(self.neuron, name).copy_(flat.expand(self.channels))
        self.type = node.type

    def forward(self, x):
        T, B = x.shape[:2]
        if x[0, 0].numel() % self.channels:
            raise ValueError(
                f"{self.type}: {self.channels} neurons, got "
                f"samples of shape {tuple(x.shape[2:])}"
            )
        y = self.neuron(x.reshape(T, B, self.channels, -1))
        return y.reshape(x.shape)

    def reset(self):
        self.neuron.reset()

    def nir_params(self, dt: float, shape) -> Dict[str, np.ndarray]:
        """NIR's parameters of the neurons as they are now, of `shape`."""
        values = {
            name: getattr(self.neuron, name).detach().cpu().double().numpy()
            for name in self.names
        }
        values = _nir_values(self.type, values, dt)
        # In float64: read back with the same dt, they give the same
        # float32 values.
        size = int(np.prod(shape))
        return {
            name: (
                value.reshape(shape)
                if value.size == size
                else np.broadcast_to(value.reshape(-1)[0], shape).copy()
            )
            for name, value in values.items()
        }


class _Sequence(nn.Module):
    """A per-sample layer run over the T·B samples of a sequence."""

    def __init__(self, layer):
        super().__init__()
        self.layer = layer

    def forward(self, x):
        y = self.layer(x.flatten(0, 1))
        return y.reshape(x.shape[:2] + y.shape[1:])


class _Scale(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = nn.Parameter(torch.as_tensor(scale, dtype=torch.float32))

    def forward(self, x):
        return x * self.scale


class _Threshold(nn.Module):
    """1 where x > threshold (strictly, as NIR says), else 0; no gradient
    (a Heaviside)."""

    def __init__(self, threshold):
        super().__init__()
        self.register_buffer(
            "threshold", torch.as_tensor(threshold, dtype=torch.float32)
        )

    def forward(self, x):
        return (x > self.threshold).to(x.dtype)


class _Flatten(nn.Module):
    """NIR's dims count within a sample (no time, no batch)."""

    def __init__(self, start_dim, end_dim):
        super().__init__()
        self.start_dim, self.end_dim = int(start_dim), int(end_dim)

    def forward(self, x):
        rank = x.dim() - 2
        start = self.start_dim % rank + 2
        end = self.end_dim % rank + 2
        return x.flatten(start, end)


def _padding(value, kernel):
    if isinstance(value, str):
        if value not in ("same", "valid"):
            raise ValueError(f"padding {value!r}")
        return value
    return tuple(
        int(v) for v in np.broadcast_to(np.asarray(value), (len(kernel),))
    )


def _ints(value, n):
    return tuple(int(v) for v in np.broadcast_to(np.asarray(value), (n,)))


def _layer(node: nir.Node, dt: float, where: str) -> nn.Module:
    """The PyTorch module of a NIR node (not Input, Output or a graph)."""
    p = node.params
    kind = node.type
    if kind in _STEPS:
        return NIRNeuron(node, dt, where)
    if kind in ("Affine", "Linear"):
        weight = torch.as_tensor(np.asarray(p["weight"]), dtype=torch.float32)
        layer = nn.Linear(
            weight.shape[1], weight.shape[0], bias=kind == "Affine"
        )
        with torch.no_grad():
            layer.weight.copy_(weight)
            if kind == "Affine":
                layer.bias.copy_(torch.as_tensor(np.asarray(p["bias"])))
        return layer
    if kind == "Scale":
        return _Scale(np.asarray(p["scale"]))
    if kind in ("Conv1d", "Conv2d"):
        weight = torch.as_tensor(np.asarray(p["weight"]), dtype=torch.float32)
        n = 1 if kind == "Conv1d" else 2
        groups = int(p["groups"])
        bias = np.asarray(p["bias"])
        cls = nn.Conv1d if n == 1 else nn.Conv2d
        layer = cls(
            weight.shape[1] * groups,
            weight.shape[0],
            tuple(weight.shape[2:]),
            stride=_ints(p["stride"], n),
            padding=_padding(p["padding"], weight.shape[2:]),
            dilation=_ints(p["dilation"], n),
            groups=groups,
            bias=bool(bias.size),
        )
        with torch.no_grad():
            layer.weight.copy_(weight)
            if bias.size:
                layer.bias.copy_(
                    torch.as_tensor(
                        np.broadcast_to(bias, (weight.shape[0],)).copy()
                    )
                )
        return _Sequence(layer)
    if kind in ("SumPool2d", "AvgPool2d"):
        size = _ints(p["kernel_size"], 2)
        pool = nn.AvgPool2d(
            size, _ints(p["stride"], 2), _ints(p["padding"], 2)
        )
        if kind == "SumPool2d":
            return nn.Sequential(_Sequence(pool), _Scale(size[0] * size[1]))
        return _Sequence(pool)
    if kind == "Flatten":
        return _Flatten(p["start_dim"], p["end_dim"])
    if kind == "Threshold":
        return _Threshold(np.asarray(p["threshold"]))
    if kind == "Delay":
        steps = np.asarray(p["delay"], np.float64) / dt
        rounded = np.round(steps)
        if np.any(rounded < 0) or not np.allclose(
            steps, rounded, rtol=0, atol=1e-6
        ):
            raise nir.NIRError(
                f"node {where!r} (Delay): delays {np.asarray(p['delay'])} "
                f"are not whole steps of dt = {dt}"
            )
        return Delay(rounded.astype(np.int64))
    raise nir.NIRError(f"node {where!r}: {kind} has no FlexSN model yet")


def _flatten_graph(
    graph: nir.Graph, prefix: str, nodes: dict, edges: list
) -> None:
    """Collects the nodes of `graph` and its nested graphs by path, and
    their edges between paths; a nested graph's Input and Output pass
    values through."""
    for name, node in graph.nodes.items():
        path = prefix + name
        if isinstance(node, nir.Graph):
            _flatten_graph(node, path + ".", nodes, edges)
        else:
            nodes[path] = node

    def end(address, role):
        # An edge to (from) a nested graph itself means its Input (Output).
        node = graph.nodes.get(address)
        if isinstance(node, nir.Graph):
            kind = "Input" if role == "target" else "Output"
            inner = [n for n, v in node.nodes.items() if v.type == kind]
            if len(inner) != 1:
                raise nir.NIRError(
                    f"graph {prefix + address!r}: an edge "
                    f"names it, and it has {len(inner)} "
                    f"{kind} nodes (not one)"
                )
            return prefix + address + "." + inner[0]
        return prefix + address

    for source, target in graph.edges:
        edges.append((end(source, "source"), end(target, "target")))


def _back_edges(nodes: dict, edges: list, start: str) -> set:
    """The edges that close a cycle, found depth first from `start` (the
    Input) along the edges in the file's order: on a cycle, the edge back
    to where the input first reached it. Such an edge carries the value
    its source had at the previous step. Raises NIRError for a node the
    input does not reach."""
    outgoing = {name: [] for name in nodes}
    for source, target in edges:
        outgoing[source].append(target)
    back, state = set(), {start: "open"}
    stack = [(start, iter(outgoing[start]))]
    while stack:  # iterative: a long chain of layers must not recurse
        name, targets = stack[-1]
        target = next(targets, None)
        if target is None:
            state[name] = "done"
            stack.pop()
        elif state.get(target) == "open":
            back.add((name, target))
        elif target not in state:
            state[target] = "open"
            stack.append((target, iter(outgoing[target])))
    unreached = [name for name in nodes if name not in state]
    if unreached:
        raise nir.NIRError(
            f"node {unreached[0]!r} "
            f"({nodes[unreached[0]].type}): the input does "
            f"not reach it"
        )
    return back


def _topological_order(nodes: dict, edges: list) -> List[str]:
    """The nodes in an order where every edge's source comes first (the
    edges must hold no cycle)."""
    incoming = {name: [] for name in nodes}
    for source, target in edges:
        incoming[target].append(source)
    order, done = [], set()
    for root in nodes:
        stack = [(root, iter(incoming[root]))]
        while stack:
            name, sources = stack[-1]
            source = next(sources, None)
            if source is None:
                stack.pop()
                if name not in done:
                    done.add(name)
                    order.append(name)
            elif source not in done:
                stack.append((source, iter(incoming[source])))
    return order


def _components(nodes: dict, edges: list) -> Dict[str, int]:
    """Each node's strongly connected component (Tarjan), numbered."""
    outgoing = {name: [] for name in nodes}
    for source, target in edges:
        outgoing[source].append(target)
    index, low, component, on_stack, stack = {}, {}, {}, set(), []
    count = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(outgoing[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            name, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(outgoing[target])))
                elif target in on_stack:
                    low[name] = min(low[name], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[name])
            if low[name] == index[name]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = count
                    if member == name:
                        break
                count += 1
    return component


def _check_cycles(nodes: dict, edges: list, component: Dict[str, int]):
    """Raises NIRError for a cycle that no neuron breaks (its value at a
    step would depend on itself: NIR's continuous time has no step to
    delay it by)."""
    sizes = collections.Counter(component.values())
    recurrent = {
        name
        for name in nodes
        if sizes[component[name]] > 1 or (name, name) in edges
    }
    plain = {
        name: nodes[name]
        for name in recurrent
        if nodes[name].type not in _STEPS
    }
    inner = [(a, b) for a, b in edges if a in plain and b in plain]
    left = _components(plain, inner)
    for name in plain:
        members = sorted(m for m in plain if left[m] == left[name])
        if len(members) > 1 or (name, name) in inner:
            raise nir.NIRError(
                f"the cycle through {', '.join(map(repr, members))} has "
                f"no neuron on it"
            )
    return recurrent


def _stages(nodes: dict, edges: list, start: str):
    """The graph as stages to run in order, each a list of nodes: a node
    off every cycle is a stage of its own, run over the whole sequence; a
    cycle's nodes make one stage, run step by step. Returns (stages, back
    edges)."""
    back = _back_edges(nodes, edges, start)
    order = _topological_order(nodes, [e for e in edges if e not in back])
    component = _components(nodes, edges)
    recurrent = _check_cycles(nodes, edges, component)
    # Each component's nodes in the order of `order`; the components
    # sources first (Tarjan numbers a component after every component it
    # feeds).
    members = {}
    for name in order:
        members.setdefault(component[name], []).append(name)
    result = [
        (members[number], members[number][0] in recurrent)
        for number in sorted(members, reverse=True)
    ]
    return result, back


class NIRModel(nn.Module):
    """A NIR graph run over sequences: `model(x)` takes x [T, B, ...] (the
    Input node's shape after T and B) and returns the Output node's
    [T, B, ...]; each call starts every neuron at rest.

    A node off every cycle runs over the whole sequence at once; the nodes
    of a cycle (a recurrent layer: spikes fed back through an Affine into
    the neuron) run step by step, the edge closing the cycle carrying the
    value its source had at the previous step (none at the first)."""

    def __init__(self, graph: nir.Graph, dt: float):
        super().__init__()
        nodes, edges = {}, []
        _flatten_graph(graph, "", nodes, edges)
        top_inputs = [n for n, v in graph.nodes.items() if v.type == "Input"]
        top_outputs = [n for n, v in graph.nodes.items() if v.type == "Output"]
        if len(top_inputs) != 1 or len(top_outputs) != 1:
            raise nir.NIRError(
                f"the graph has {len(top_inputs)} Input and "
                f"{len(top_outputs)} Output nodes: a model takes one and "
                f"gives one"
            )
        self.input, self.output = top_inputs[0], top_outputs[0]
        self.sources = {name: [] for name in nodes}
        for source, target in edges:
            self.sources[target].append(source)
        for name, node in nodes.items():
            if name != self.input and not self.sources[name]:
                raise nir.NIRError(
                    f"node {name!r} ({node.type}): nothing " f"feeds it"
                )
        self.stages, self.back_edges = _stages(nodes, edges, self.input)
        self.nodes, self.edges = nodes, edges  # for to_nir
        self.layers = nn.ModuleDict()
        for members, _ in self.stages:
            for name in members:
                if nodes[name].type not in ("Input", "Output"):
                    self.layers[self._key(name)] = _layer(
                        nodes[name], dt, name
                    )
        self.dt = dt
        self._checking_shapes = False
        self._check_shapes()

    @staticmethod
    def _key(name: str) -> str:
        # ModuleDict keys hold no '.'.
        return name.replace(".", "__")

    def reset(self):
        for layer in self.layers.values():
            if isinstance(layer, (NIRNeuron, Delay)):
                layer.reset()

    def _run(self, name, inputs):
        try:
            total = inputs[0]
            for other in inputs[1:]:
                total = total + other
            key = self._key(name)
            return self.layers[key](total) if key in self.layers else total
        except (RuntimeError, ValueError) as error:
            if not getattr(self, "_checking_shapes", False):
                raise
            shapes = ", ".join(str(tuple(i.shape[2:])) for i in inputs)
            raise nir.NIRError(
                f"node {name!r} ({self.nodes[name].type}): what its edges "
                f"bring ({shapes}, from "
                f"{', '.join(map(repr, self.sources[name]))}) does not fit "
                f"it: {error}"
            ) from None

    def _check_shapes(self):
        """Raises NIRError, naming the node, for shapes that do not fit
        along an edge: runs one step of one sample of the Input's shape.
        (An Output's own shape is not held against what reaches it:
        writers spell it differently, Rockpool's one neuron as [1, 1,
        1].)"""
        shape = tuple(
            int(v)
            for v in np.atleast_1d(self.nodes[self.input].params["shape"])
        )
        self._checking_shapes = True
        try:
            with torch.no_grad():
                self(torch.zeros((1, 1) + shape))
        finally:
            self._checking_shapes = False
            self.reset()

    def _at_rest(self, members, values):
        """What each node of a cycle gives before the first step, every
        neuron at rest (its output zero, as a Delay's is): the value an
        edge closing the cycle carries into step 0 (a recurrent Affine's
        bias)."""
        rest = {}
        back = [e for e in self.back_edges if e[1] in members]
        # A neuron's zero has the shape of its input, which a pass learns
        # without the edges closing the cycle; each further pass carries
        # the sources of those edges one node on (a neuron on every cycle
        # keeps the number of passes below the number of those edges).
        for _ in range(len(back) + 1):
            for name in members:
                inputs = [
                    rest[source]
                    if source in members
                    else torch.zeros_like(values[source][:1])
                    for source in self.sources[name]
                    if source in rest or source not in members
                ]
                if self.nodes[name].type in _STATEFUL:
                    rest[name] = torch.zeros_like(sum(inputs))
                else:
                    rest[name] = self._run(name, inputs)
        return rest

    def _recurrent_layer(self, members):
        """The names (neuron, affine) of a cycle that is a recurrent
        layer, a neuron whose output an Affine or Linear of [H, H] feeds
        back into it and nothing else; else None."""
        if len(members) != 2:
            return None
        layers = {
            name: self.layers[self._key(name)]
            for name in members
            if self._key(name) in self.layers
        }
        for neuron, affine in (members, members[::-1]):
            if (
                isinstance(layers.get(neuron), NIRNeuron)
                and isinstance(layers.get(affine), nn.Linear)
                and self.sources[affine] == [neuron]
                and self.sources[neuron].count(affine) == 1
                and len(self.sources[neuron]) > 1
            ):
                return neuron, affine
        return None

    def _run_recurrent_layer(self, neuron, affine, values) -> bool:
        """Runs a recurrent layer's cycle as the neuron's coupled kernels
        (coupled_scan: one forward kernel and one backward kernel over the
        sequence), where they run its drive; returns whether they did.

        The neuron's input at step t is what reaches it from outside the
        cycle plus W s[t-1] + b, s[-1] = 0: at step 0 the edge closing the
        cycle carries the Affine's bias, whichever edge closes it."""
        layer = self.layers[self._key(affine)]
        cell = self.layers[self._key(neuron)]
        drive = sum(
            values[source]
            for source in self.sources[neuron]
            if source != affine
        )
        weights = layer.weight
        if (
            drive.dim() != 3
            or drive.shape[0] == 0
            or tuple(weights.shape) != (drive.shape[2],) * 2
            or drive.shape[2] % cell.channels
            or not runs_coupled(cell.neuron, drive)
        ):
            return False
        if layer.bias is not None:
            drive = drive + layer.bias
        spikes = coupled_scan(cell.neuron, drive, weights)
        values[neuron] = spikes
        if (neuron, affine) in self.back_edges:
            # The Affine steps first, on the neuron's previous output.
            spikes = torch.cat([torch.zeros_like(spikes[:1]), spikes[:-1]])
        values[affine] = layer(spikes)
        return True

    def _run_cycle(self, members, values, steps):
        """The nodes of a cycle, step by step: [1, B, ...] slices through
        each layer (a neuron carries its states from one call to the
        next); an edge closing the cycle carries its source's value of the
        previous step. A recurrent layer runs as its coupled kernels
        instead."""
        layer = self._recurrent_layer(members)
        if layer and self._run_recurrent_layer(*layer, values):
            return
        if steps == 0:  # empty sequences, with the shapes a step gives
            for name in members:
                values[name] = self._run(
                    name,
                    [
                        values[source]
                        for source in self.sources[name]
                        if (source, name) not in self.back_edges
                    ],
                )
            return
        sequences = {name: [] for name in members}
        previous = self._at_rest(members, values)
        for t in range(steps):
            current = {}
            for name in members:
                inputs = []
                for source in self.sources[name]:
                    if (source, name) in self.back_edges:
                        inputs.append(previous[source])
                    elif source in current:
                        inputs.append(current[source])
                    else:
                        inputs.append(values[source][t : t + 1])
                current[name] = self._run(name, inputs)
                sequences[name].append(current[name])
            previous = current
        for name in members:
            values[name] = torch.cat(sequences[name])

    def forward(self, x):
        self.reset()
        values = {self.input: x}
        for members, recurrent in self.stages:
            if recurrent:
                self._run_cycle(members, values, x.shape[0])
            elif members[0] != self.input:
                values[members[0]] = self._run(
                    members[0], [values[s] for s in self.sources[members[0]]]
                )
        return values[self.output]


def from_nir(graph: Union[nir.Graph, str], dt: float = 1e-4) -> NIRModel:
    """The model of a NIR graph (or of the NIR file at that path), its
    continuous-time neurons discretized by forward Euler with step `dt`
    (NIR stores none; 1e-4 s is what its converters use). docs/NIR.md."""
    if not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
        raise ValueError(
            f"dt must be a positive number of seconds, got " f"{dt!r}"
        )
    if not isinstance(graph, (nir.Graph, nir.Node)):
        graph = nir.read(graph)
    if isinstance(graph, nir.Node):
        raise nir.NIRError(f"the file holds one {graph.type} node, no graph")
    return NIRModel(graph, float(dt))


# -- a model to NIR ----------------------------------------------------------


def _array(value, shape):
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().double().numpy()
    return np.broadcast_to(np.asarray(value, np.float64), shape).astype(
        np.float32
    )


def _without_passthroughs(model: NIRModel) -> tuple:
    """The model's nodes and edges without the Input and Output nodes of
    the nested graphs it flattened: each edge through one joins its
    sources to its targets."""
    inner = [
        name
        for name, node in model.nodes.items()
        if node.type in ("Input", "Output")
        and name not in (model.input, model.output)
    ]
    edges = list(model.edges)
    for name in inner:
        sources = [a for a, b in edges if b == name]
        targets = [b for a, b in edges if a == name]
        edges = [e for e in edges if name not in e]
        edges += [(a, b) for a in sources for b in targets]
    nodes = {k: v for k, v in model.nodes.items() if k not in inner}
    return nodes, edges


def _graph_of_model(model: NIRModel) -> nir.Graph:
    """The graph of a NIRModel with its parameters as they are now: one
    flat graph, a nested graph's nodes named by their path ("sub.lif", as
    NIR's own writer names a graph it flattened), without its Input and
    Output nodes."""
    nodes = {}
    flat_nodes, flat_edges = _without_passthroughs(model)
    for name, node in flat_nodes.items():
        params = dict(node.params)
        layer = (
            model.layers[model._key(name)]
            if model._key(name) in model.layers
            else None
        )
        if isinstance(layer, NIRNeuron):
            shape = max(
                (np.shape(v) for v in node.params.values()),
                key=lambda s: int(np.prod(s)),
            )
            params.update(layer.nir_params(model.dt, shape))
        elif isinstance(layer, nn.Linear):
            params["weight"] = _array(layer.weight, layer.weight.shape)
            if layer.bias is not None:
                params["bias"] = _array(layer.bias, layer.bias.shape)
        elif isinstance(layer, _Sequence) and isinstance(
            layer.layer, (nn.Conv1d, nn.Conv2d)
        ):
            conv = layer.layer
            params["weight"] = _array(conv.weight, conv.weight.shape)
            if conv.bias is not None:
                params["bias"] = _array(conv.bias, conv.bias.shape)
        elif isinstance(layer, _Scale):
            params["scale"] = _array(layer.scale, layer.scale.shape)
        nodes[name] = nir.Node(node.type, params, dict(node.metadata))
    return nir.Graph(nodes, flat_edges)


def _neuron_node(module, name: str, n: int, dt: float) -> nir.Node:
    """The NIR node of a FlexSN IFNode, LIFNode or ParametricLIFNode of n
    neurons: LIF with tau = tau_steps·dt, r = 1 (or tau_steps without
    decay_input) and v_leak = v_reset; IF with r = 1/dt."""
    from ._modules import IFNode, LIFNode, ParametricLIFNode

    kind = type(module).__name__
    if not isinstance(module, (IFNode, LIFNode, ParametricLIFNode)):
        raise nir.NIRError(
            f"module {name!r} ({kind}): no NIR equivalent "
            f"(IFNode, LIFNode and ParametricLIFNode have "
            f"one)"
        )
    if module.v_reset is None:
        raise nir.NIRError(
            f"module {name!r} ({kind}): a soft reset has no "
            f"NIR equivalent (NIR resets to v_reset)"
        )
    shape = (n,)
    v_threshold = _array(module.v_threshold, shape)
    v_reset = _array(module.v_reset, shape)
    if isinstance(module, IFNode):
        return nir.Node(
            "IF",
            {
                "r": np.full(shape, 1.0 / dt),
                "v_threshold": v_threshold,
                "v_reset": v_reset,
            },
        )
    if isinstance(module, ParametricLIFNode):
        tau = 1.0 / torch.sigmoid(module.w.detach().double())
    else:
        tau = module.tau
    tau = _array(tau, shape).astype(np.float64)
    r = np.ones(shape) if module.decay_input else tau
    # tau in float64: read back with the same dt, it gives tau steps again.
    return nir.Node(
        "LIF",
        {
            "tau": tau * dt,
            "r": _array(r, shape),
            "v_leak": v_reset,
            "v_threshold": v_threshold,
            "v_reset": v_reset,
        },
    )


def _linear_node(layer: nn.Linear, name: str, size: int) -> nir.Node:
    """The Affine (Linear, without a bias) node of an nn.Linear fed `size`
    features."""
    if layer.in_features != size:
        raise nir.NIRError(
            f"module {name!r} (Linear): takes "
            f"{layer.in_features} features, gets {size}"
        )
    weight = _array(layer.weight, layer.weight.shape)
    if layer.bias is None:
        return nir.Node("Linear", {"weight": weight})
    return nir.Node(
        "Affine",
        {"weight": weight, "bias": _array(layer.bias, layer.bias.shape)},
    )


def _recurrent_graph(
    layer: Recurrent, name: str, size: int, dt: float
) -> nir.Graph:
    """A Recurrent layer as a nested graph: input -> input weights ->
    neuron -> output, and the neuron's spikes back into it through the
    recurrent weights (the cycle from_nir runs step by step)."""
    n = layer.hidden_size
    return nir.Graph(
        {
            "input": nir.Node("Input", {"shape": np.array([size])}),
            "w_in": _linear_node(layer.input, f"{name}.input", size),
            "neuron": _neuron_node(layer.neuron, f"{name}.neuron", n, dt),
            "w_rec": _linear_node(layer.recurrent, f"{name}.recurrent", n),
            "output": nir.Node("Output", {"shape": np.array([n])}),
        },
        [
            ("input", "w_in"),
            ("w_in", "neuron"),
            ("neuron", "w_rec"),
            ("w_rec", "neuron"),
            ("neuron", "output"),
        ],
    )


def _graph_of_sequence(
    model: nn.Sequential, dt: float, input_shape
) -> nir.Graph:
    """nn.Linear layers and FlexSN neurons in a row (nested Sequentials
    flattened), over [T, B, features]."""
    layers = []

    def collect(module, prefix):
        for name, child in module.named_children():
            if isinstance(child, nn.Sequential):
                collect(child, prefix + name + "__")
            else:
                layers.append((prefix + name, child))

    collect(model, "")
    size = None if input_shape is None else int(np.prod(input_shape))
    if size is None and layers and isinstance(layers[0][1], nn.Linear):
        size = layers[0][1].in_features
    if size is None and layers and isinstance(layers[0][1], Recurrent):
        size = layers[0][1].input_size
    if size is None:
        raise nir.NIRError(
            "the model starts with no nn.Linear or "
            "Recurrent layer: give input_shape="
        )
    nodes = {"input": nir.Node("Input", {"shape": np.array([size])})}
    edges, previous = [], "input"
    for name, layer in layers:
        if isinstance(layer, nn.Linear):
            node = _linear_node(layer, name, size)
            size = layer.out_features
        elif isinstance(layer, Recurrent):
            node = _recurrent_graph(layer, name, size, dt)
            size = layer.hidden_size
        elif isinstance(layer, Delay):
            steps = layer.steps.detach().cpu().double().numpy()
            if steps.size not in (1, size):
                raise nir.NIRError(
                    f"module {name!r} (Delay): {steps.size} "
                    f"delays for {size} features"
                )
            node = nir.Node(
                "Delay",
                {
                    "delay": np.broadcast_to(
                        steps.reshape(-1) * dt, (size,)
                    ).copy()
                },
            )
        elif isinstance(layer, nn.Identity):
            continue
        else:
            node = _neuron_node(layer, name, size, dt)
        nodes[name] = node
        edges.append((previous, name))
        previous = name
    nodes["output"] = nir.Node("Output", {"shape": np.array([size])})
    edges.append((previous, "output"))
    return nir.Graph(nodes, edges)


def to_nir(model: nn.Module, dt: float = 1e-4, input_shape=None) -> nir.Graph:
    """The NIR graph of `model`: a model from `from_nir` (its parameters as
    trained), or an nn.Sequential of nn.Linear layers, Recurrent layers,
    Delay layers and FlexSN IFNode, LIFNode and ParametricLIFNode neurons
    over [T, B, features] (`input_shape`: the features, where the model
    does not start with a Linear; a Recurrent layer becomes a nested
    graph).
    Its neurons' time constants, in steps, become seconds with `dt`. What
    has no NIR equivalent (a soft reset, another module) is an error
    naming the module."""
    if not (isinstance(dt, (int, float)) and math.isfinite(dt) and dt > 0):
        raise ValueError(
            f"dt must be a positive number of seconds, got " f"{dt!r}"
        )
    if isinstance(model, NIRModel):
        return _graph_of_model(model)
    if isinstance(model, nn.Sequential):
        return _graph_of_sequence(model, float(dt), input_shape)
    raise nir.NIRError(
        f"{type(model).__name__}: to_nir takes a model from "
        f"from_nir or an nn.Sequential"
    )
