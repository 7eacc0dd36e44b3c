"""torch.fx tracing that knows the shapes of one call.

A plain torch.fx trace sees `x.shape`, `x.ndim` and `x.size()` as graph
values, so a forward that branches on them (`if x.ndim != 5: raise`),
unpacks them (`T, B = x.shape[:2]`) or iterates them fails to trace: the
model-zoo forwards of spiking transformers and SpikingJelly's
`SeqToANNContainer` all do. `ShapeTracer` traces one call with the
shapes of its actual inputs: every value carries a meta tensor (shape,
strides, dtype; no data), computed op by op, and a forward reading a
shape gets the number. The graph is then valid for inputs of those
shapes and dtypes only: the caller keys it by them.

A leaf module's meta value is its forward run on meta copies of its
parameters and buffers, its attributes restored afterwards (a batch
norm's statistics and batch count are not touched); FlexSN neurons and
the modules that keep their input's shape (batch norms, dropout) give a
value like their input without running. A value that cannot be computed
is left unknown: a forward that then reads its shape fails to trace, and
the caller runs the module as it is.
"""

import inspect
from typing import Dict, Optional

import torch
from torch import fx, nn

from ._guards import attributes_restored, recording_reads

#: Leaf modules whose output is like their (first) input.
_SHAPE_KEEPING = (nn.modules.batchnorm._BatchNorm, nn.Dropout, nn.Identity)


def _from_value(attribute: str):
    """A property answering `attribute` from the meta value where it is
    known, else a graph value as torch.fx's proxies do."""

    def get(self):
        value = self._value()
        if isinstance(value, torch.Tensor):
            return getattr(value, attribute)
        return fx.proxy.Attribute(self, attribute)

    return property(get)


class _ShapeProxy(fx.Proxy):
    """A proxy that answers shape questions from its meta value."""

    def _value(self):
        return self.__dict__.get("meta")

    shape = _from_value("shape")
    ndim = _from_value("ndim")
    dtype = _from_value("dtype")

    def size(self, *dim):
        value = self._value()
        if isinstance(value, torch.Tensor):
            return value.size(*dim)
        return self.tracer.create_proxy(
            "call_method", "size", (self,) + dim, {}
        )

    def dim(self):
        value = self._value()
        if isinstance(value, torch.Tensor):
            return value.dim()
        return self.tracer.create_proxy("call_method", "dim", (self,), {})

    def __iter__(self):
        # `a, b, c = x.chunk(3)`: one item per element of the value (fx's
        # own answer reads the caller's bytecode, which newer Pythons
        # laid out otherwise).
        value = self._value()
        if isinstance(value, (tuple, list)) or (
            isinstance(value, torch.Tensor) and value.dim()
        ):
            return iter([self[i] for i in range(len(value))])
        return super().__iter__()

    def __len__(self):
        value = self._value()
        if value is None:
            return super().__len__()
        return len(value)


class _Unknown(Exception):
    pass


def _meta_of(value):
    if isinstance(value, fx.Proxy):
        meta = value.__dict__.get("meta")
        if meta is None:
            raise _Unknown
        return meta
    return value


class ShapeTracer(fx.Tracer):
    """Traces `root` with meta values for its tensor inputs (see the
    module's doc); `leaf(module)` says which modules stay single calls."""

    def __init__(self, leaf):
        super().__init__()
        self._leaf = leaf
        self._placeholders: Dict[str, torch.Tensor] = {}
        self._computing = False

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return self._leaf(m) or super().is_leaf_module(m, qualname)

    def proxy(self, node):
        return _ShapeProxy(node, self)

    def getattr(self, attr, attr_val, parameter_proxy_cache):
        # A leaf module's forward run for its meta value reads its real
        # attributes, not graph nodes.
        if self._computing:
            return attr_val
        return super().getattr(attr, attr_val, parameter_proxy_cache)

    def create_proxy(
        self,
        kind,
        target,
        args,
        kwargs,
        name=None,
        type_expr=None,
        proxy_factory_fn=None,
    ):
        proxy = super().create_proxy(
            kind, target, args, kwargs, name, type_expr, proxy_factory_fn
        )
        if isinstance(proxy, _ShapeProxy):
            try:
                proxy.__dict__["meta"] = self._meta(kind, target, args, kwargs)
            except Exception:  # noqa: BLE001: the value stays unknown
                proxy.__dict__["meta"] = None
        return proxy

    def _meta(self, kind, target, args, kwargs):
        if kind == "placeholder":
            return self._placeholders.get(target)
        if kind == "get_attr":
            value = self.root
            for atom in target.split("."):
                value = getattr(value, atom)
            return (
                value.to("meta") if isinstance(value, torch.Tensor) else None
            )
        args = fx.node.map_aggregate(args, _meta_of)
        kwargs = fx.node.map_aggregate(kwargs, _meta_of)
        if kind == "call_function":
            return target(*args, **kwargs)
        if kind == "call_method":
            return getattr(args[0], target)(*args[1:], **kwargs)
        if kind == "call_module":
            return self._module_meta(
                self.root.get_submodule(target), args, kwargs
            )
        return None

    def _module_meta(self, module: nn.Module, args, kwargs):
        from ._modules import FlexSN

        if isinstance(module, FlexSN):
            single = len(module.info.outputs) == 1
            return torch.empty_like(args[0]) if single and not kwargs else None
        if isinstance(module, _SHAPE_KEEPING) and len(args) == 1:
            return torch.empty_like(args[0])
        # Run on meta copies of its parameters and buffers; its attributes
        # (and tables) are put back as they were, whatever it set.
        self._computing = True
        try:
            with attributes_restored(module), torch.no_grad():
                for table in ("_parameters", "_buffers"):
                    entries = getattr(module, table)
                    for key, value in list(entries.items()):
                        if value is not None:
                            entries[key] = value.detach().to("meta")
                return module.forward(*args, **kwargs)
        finally:
            self._computing = False

    def trace_call(self, root: nn.Module, args) -> fx.Graph:
        """The graph of `root(*args)` (tensors only) for these shapes."""
        names = [
            p.name
            for p in inspect.signature(root.forward).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        ]
        if len(names) < len(args):
            raise TypeError("more arguments than the forward names")
        self._placeholders = {
            name: torch.empty_strided(
                a.shape, a.stride(), dtype=a.dtype, device="meta"
            )
            for name, a in zip(names, args)
        }
        return self.trace(root)


def call_signature(module: nn.Module, args, kwargs) -> Optional[tuple]:
    """What a shape-specialized graph of `module` holds for: the shapes,
    dtypes and devices of its positional tensor arguments, and its mode;
    None for a call a graph cannot take (keyword or non-tensor
    arguments)."""
    if (
        kwargs
        or not args
        or not all(isinstance(a, torch.Tensor) for a in args)
    ):
        return None
    return (module.training,) + tuple(
        (tuple(a.shape), a.dtype, a.device) for a in args
    )


def shape_trace(module: nn.Module, args, leaf, reads):
    """The graph of `module(*args)` traced with their shapes, recording
    the plain attributes its forward reads in `reads`."""
    tracer = ShapeTracer(leaf)
    with attributes_restored(module), recording_reads(module, reads):
        return tracer.trace_call(module, args)
