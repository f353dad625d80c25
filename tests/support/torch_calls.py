"""What code asks of torch, counted on the CPU: aten ops (on CUDA each a launch) and host reads (on
CUDA each a sync). A host read is a tensor handing data to Python (`.item()`, `float()`, `int()`,
`bool()`, `.tolist()`, `.numpy()`, `.cpu()`, seen as torch functions), a tensor made from Python
data (`lift_fresh`, an upload) or `nonzero` (its size is data), both seen as aten ops. Issue #37;
used by its tests and bench/device_path.py."""

from __future__ import annotations

from collections import Counter

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

TENSOR_READS = frozenset({"item", "tolist", "numpy", "cpu", "__float__", "__int__", "__bool__", "__index__"})
ATEN_READS = frozenset({"lift_fresh", "nonzero"})


class TorchCalls:
    """`with TorchCalls() as calls:` ... then `calls.ops` (aten ops that are not reads) and
    `calls.reads`, each a Counter by name."""

    def __init__(self) -> None:
        self.ops: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        self._modes = (_PythonReads(self.reads), _AtenCalls(self.ops, self.reads))

    def __enter__(self) -> TorchCalls:
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)


class _PythonReads(TorchFunctionMode):
    def __init__(self, reads: Counter[str]) -> None:
        super().__init__()
        self.reads = reads

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in TENSOR_READS:
            self.reads[name] += 1
        return func(*args, **(kwargs or {}))


class _AtenCalls(TorchDispatchMode):
    def __init__(self, ops: Counter[str], reads: Counter[str]) -> None:
        super().__init__()
        self.ops, self.reads = ops, reads

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._overloadpacket.__name__
        (self.reads if name in ATEN_READS else self.ops)[name] += 1
        return func(*args, **(kwargs or {}))
