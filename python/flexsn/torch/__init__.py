"""PyTorch integration: modules, autograd and the `flexsn::scan` custom op.

    from flexsn.torch import LIFNode, FlexSN
    lif = LIFNode(tau=2.0, surrogate_function=flexsn.surrogate.ATan(),
                  step_mode="m")
    spikes = lif(x_seq)            # x_seq: [T, N...], CPU or CUDA
    model = flexsn.torch.fuse(model)   # batch norm -> neuron chains fused
"""

from ._block import Affine, Block, Residual
from ._convert import convert
from ._delay import Delay
from ._function import (
    Handle,
    compile_policy,
    get_compile_policy,
    has_custom_op,
    scan,
    set_compile_policy,
)
from ._fuse import fuse
from ._kernels import unpack_spikes
from ._modules import (
    FlexSN,
    IFNode,
    LIFNode,
    ParametricLIFNode,
    set_recompute,
)
from ._nir import NIRModel, from_nir, to_nir
from ._recurrent import Recurrent

__all__ = [
    "Affine",
    "Block",
    "Delay",
    "FlexSN",
    "Handle",
    "IFNode",
    "LIFNode",
    "NIRModel",
    "ParametricLIFNode",
    "Recurrent",
    "Residual",
    "compile_policy",
    "convert",
    "from_nir",
    "fuse",
    "get_compile_policy",
    "has_custom_op",
    "scan",
    "set_compile_policy",
    "set_recompute",
    "to_nir",
    "unpack_spikes",
]
