"""What a traced forward read as plain Python values, and the guards that
keep a fused model computing what the unfused one computes after they
change.

torch.fx runs a forward once and records only tensor operations: a plain
attribute the forward reads (`self.training` in an `if`, a `self.T`, a
connection name, a neuron's state `self.sn.v`) is taken at its value then
and frozen into the graph. `recording_reads` records those reads while a
model is traced; `Guards` checks at each call that the values are still
the ones traced. A fused module whose guards fail runs its unfused forward
(the original module, whose submodules it shares), so a changed attribute
or mode never gives a silently different result.
"""

import contextlib
import copy
import os
import sys
from typing import Dict, List, Optional, Tuple

import torch
import torch.fx
from torch import nn

_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))
_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _from_user_code(frame) -> bool:
    path = os.path.abspath(frame.f_code.co_filename)
    return not (path.startswith(_TORCH_DIR) or path.startswith(_PACKAGE_DIR))


#: {(id(module), name): (module, name, value)}, in the order first read.
Reads = Dict[Tuple[int, str], Tuple[nn.Module, str, object]]


@contextlib.contextmanager
def recording_reads(root: nn.Module, reads: Reads):
    """Records in `reads` every plain attribute (not a parameter, buffer,
    submodule, method or private name) that user code reads from `root`'s
    modules while the context is open. Each module's class is swapped for
    a subclass that watches `__getattribute__` (parameters, buffers and
    submodules come through `__getattr__` and are not seen), and swapped
    back at the end."""
    subclasses = {}
    swapped: List[Tuple[nn.Module, type]] = []

    def watching(cls):
        def __getattribute__(self, name):
            value = cls.__getattribute__(self, name)
            if (
                not name.startswith("_")
                and not callable(value)
                and _from_user_code(sys._getframe(1))
            ):
                reads.setdefault((id(self), name), (self, name, value))
            return value

        return type(
            cls.__name__,
            (cls,),
            {
                "__getattribute__": __getattribute__,
                "__module__": cls.__module__,
                "__qualname__": cls.__qualname__,
            },
        )

    try:
        for module in root.modules():
            cls = type(module)
            if cls not in subclasses:
                subclasses[cls] = watching(cls)
            swapped.append((module, cls))
            module.__class__ = subclasses[cls]
        yield reads
    finally:
        for module, cls in swapped:
            module.__class__ = cls


@contextlib.contextmanager
def attributes_restored(root: nn.Module):
    """Puts every module of `root` back as it was when the context closes:
    its attributes, and the contents of those that are dicts (a
    SpikingJelly neuron keeps its state in one, `_memories`). A traced
    forward runs on proxies (or meta tensors): whatever it sets, such as
    `self.v = self.v + x`, must not stay in the model. An attribute the
    trace added is kept (torch.fx puts a forward's tensor constants on
    the traced module, where its graph reads them) unless it holds a
    proxy or a meta tensor."""
    saved = []
    for module in root.modules():
        attributes = dict(module.__dict__)
        saved.append(
            (
                module,
                attributes,
                [
                    (d, dict(d))
                    for d in attributes.values()
                    if isinstance(d, dict)
                ],
            )
        )
    try:
        yield
    finally:
        for module, attributes, contents in saved:
            for d, items in contents:
                d.clear()
                d.update(items)
            added = {
                k: v
                for k, v in module.__dict__.items()
                if k not in attributes and not _traced_value(v)
            }
            module.__dict__.clear()
            module.__dict__.update(attributes)
            module.__dict__.update(added)


def _traced_value(value) -> bool:
    return isinstance(value, torch.fx.Proxy) or (
        isinstance(value, torch.Tensor) and value.is_meta
    )


def _snapshot(value):
    """What a guard compares with: containers copied (a list changed in
    place must fail its guard), everything else as it is."""
    if isinstance(value, (list, dict, set)):
        return copy.copy(value)
    return value


def _same(recorded, current) -> bool:
    if recorded is current:
        return True
    if isinstance(recorded, torch.Tensor) or isinstance(current, torch.Tensor):
        return False  # a tensor replaced by another
    try:
        return type(recorded) is type(current) and bool(recorded == current)
    except Exception:  # noqa: BLE001: an object without a usable ==
        return False


class Guards:
    """The plain values a traced forward read: the root's `training` (of
    the module the caller holds; a submodule's, read where it is, as its
    other attributes), the root's own attributes (read from the module
    the caller holds, to which they are copied), and the attributes of
    the modules inside it (read where they are)."""

    def __init__(self, root: nn.Module, reads: Reads):
        self.training: Optional[bool] = None
        self.root: List[Tuple[str, object]] = []
        self.inner: List[Tuple[nn.Module, str, object]] = []
        for module, name, value in reads.values():
            if name == "training" and module is root:
                self.training = bool(value)
            elif module is root:
                self.root.append((name, _snapshot(value)))
            else:
                self.inner.append((module, name, _snapshot(value)))

    def __bool__(self) -> bool:
        return self.training is not None or bool(self.root or self.inner)

    def changed(self, holder: nn.Module) -> Optional[str]:
        """What differs from the traced values (`holder` the module the
        caller holds), or None."""
        if self.training is not None and holder.training != self.training:
            return f"training is {holder.training}"
        for name, value in self.root:
            if not _same(value, getattr(holder, name, None)):
                return f"{name} changed"
        for module, name, value in self.inner:
            if not _same(value, getattr(module, name, None)):
                return f"{type(module).__name__}.{name} changed"
        return None

    def describe(self, paths: Dict[int, str]) -> str:
        names = (
            (["training"] if self.training is not None else [])
            + [name for name, _ in self.root]
            + [
                f"{paths.get(id(m), type(m).__name__)}.{n}"
                for m, n, _ in self.inner
            ]
        )
        return ", ".join(names)
