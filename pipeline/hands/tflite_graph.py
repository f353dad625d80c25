"""A .tflite graph run as torch operations, batched, on any device (no TFLite runtime).

For small convolutional graphs made of the operators below (MediaPipe's palm detector and hand
landmarks). The
graph's NHWC activations are held as NCHW tensors; the two operators whose meaning depends on
the layout (RESHAPE, CONCATENATION) see NHWC. fp16 constants (DEQUANTIZE) become float32.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from pipeline.landmarks.tflite_file import TfliteFileError, TfliteGraph

SUPPORTED = {
    "DEQUANTIZE", "CONV_2D", "DEPTHWISE_CONV_2D", "PRELU", "ADD", "MAX_POOL_2D", "PAD",
    "RESIZE_BILINEAR", "RESHAPE", "CONCATENATION", "MEAN", "FULLY_CONNECTED", "LOGISTIC",
}  # fmt: skip


class TfliteTorchGraph:
    def __init__(self, graph: TfliteGraph, device: torch.device) -> None:
        unknown = {op.kind for op in graph.operators} - SUPPORTED
        if unknown:
            raise TfliteFileError(f"operators this executor does not run: {sorted(unknown)}")
        self.graph = graph
        self.device = device
        # constants once, on the device
        self._constants: dict[int, torch.Tensor] = {}
        for tensor in graph.tensors:
            if tensor.data is not None and tensor.dtype.kind == "f":
                self._constants[tensor.index] = torch.from_numpy(tensor.data.astype(np.float32)).to(device)
        self._ints = {t.index: t.data for t in graph.tensors if t.data is not None and t.dtype.kind == "i"}
        for op in graph.operators:
            if op.kind == "DEQUANTIZE":
                self._constants[op.outputs[0]] = self._constants[op.inputs[0]]
        # per operator, ready to call: conv kernels as OIHW (depthwise C1HW), PReLU alphas per channel.
        # Activations and kernels are kept channels-last: a 1x1 kernel counts as channels-last
        # either way, so with NCHW activations torch gave those convolutions channels-last outputs
        # and every ADD after them mixed layouts (palms 59 -> 37 ms on one thread of an AVX2 EPYC).
        self._weights: dict[int, torch.Tensor] = {}
        channels_last = torch.channels_last
        for index, op in enumerate(graph.operators):
            if op.kind == "CONV_2D":
                kernel = self._constants[op.inputs[1]].permute(0, 3, 1, 2)
                self._weights[index] = kernel.contiguous(memory_format=channels_last)
            elif op.kind == "DEPTHWISE_CONV_2D":
                kernel = self._constants[op.inputs[1]].permute(3, 0, 1, 2)
                self._weights[index] = kernel.contiguous(memory_format=channels_last)
            elif op.kind == "PRELU":
                self._weights[index] = self._constants[op.inputs[1]].reshape(-1).contiguous()

    @torch.inference_mode()
    def run(self, images: torch.Tensor) -> list[torch.Tensor]:
        """images [N, C, H, W] float (the graph's input, as NCHW) -> the graph's outputs (NHWC
        semantics, batch first)."""
        images = images.to(self.device, torch.float32).contiguous(memory_format=torch.channels_last)
        values: dict[int, torch.Tensor] = {self.graph.inputs[0]: images}
        for index, op in enumerate(self.graph.operators):
            if op.kind == "DEQUANTIZE":
                continue
            values[op.outputs[0]] = self._apply(index, op, values)
        return [values[index] for index in self.graph.outputs]

    def _value(self, index: int, values: dict[int, torch.Tensor]) -> torch.Tensor:
        return values[index] if index in values else self._constants[index]

    def _apply(self, index: int, op, values: dict[int, torch.Tensor]) -> torch.Tensor:  # type: ignore[no-untyped-def]
        x = self._value(op.inputs[0], values)
        o = op.options
        if op.kind in ("CONV_2D", "DEPTHWISE_CONV_2D"):
            weight = self._weights[index]
            bias = self._constants[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
            groups = 1 if op.kind == "CONV_2D" else x.shape[1]
            stride = (o["stride_h"], o["stride_w"])
            padding: tuple[int, int] = (0, 0)
            if o["padding"] == "SAME":
                pads = _same_pads(x, weight.shape[2:], stride)
                if pads[0] == pads[1] and pads[2] == pads[3]:
                    padding = (pads[2], pads[0])  # symmetric: let the convolution pad
                else:
                    x = F.pad(x, pads)
            return _activate(F.conv2d(x, weight, bias, stride=stride, padding=padding, groups=groups), o)
        if op.kind == "PRELU":
            return F.prelu(x, self._weights[index])
        if op.kind == "ADD":
            return _activate(x + self._value(op.inputs[1], values), o)
        if op.kind == "MAX_POOL_2D":
            size, stride = (o["filter_h"], o["filter_w"]), (o["stride_h"], o["stride_w"])
            if o["padding"] == "SAME":
                x = _same_pad(x, size, stride, value=float("-inf"))
            return F.max_pool2d(x, size, stride)
        if op.kind == "PAD":
            (n0, n1), (h0, h1), (w0, w1), (c0, c1) = self._ints[op.inputs[1]].tolist()
            if n0 or n1:
                raise TfliteFileError("PAD along the batch is not supported")
            return F.pad(x, (w0, w1, h0, h1, c0, c1))
        if op.kind == "RESIZE_BILINEAR":
            height, width = self._ints[op.inputs[1]].tolist()
            if not o.get("align_corners") and not o.get("half_pixel_centers"):
                return _resize_asymmetric(x, height, width)
            return F.interpolate(x, size=(height, width), mode="bilinear", align_corners=bool(o.get("align_corners")))
        if op.kind == "RESHAPE":
            if x.dim() == 4:
                x = x.permute(0, 2, 3, 1)  # NHWC order for the flattening
            shape = (
                list(self._ints[op.inputs[1]].tolist())
                if len(op.inputs) > 1
                else list(self.graph.tensors[op.outputs[0]].shape)
            )
            shape[0] = x.shape[0]  # any batch
            return x.reshape(shape)
        if op.kind == "CONCATENATION":
            parts = [self._value(i, values) for i in op.inputs]
            axis = o["axis"]
            if parts[0].dim() == 4:
                axis = {0: 0, 1: 2, 2: 3, 3: 1, -1: 1}[axis]
            return _activate(torch.cat(parts, dim=axis), o)
        if op.kind == "MEAN":
            axes = sorted(self._ints[op.inputs[1]].tolist())
            if x.dim() != 4 or axes != [1, 2]:
                raise TfliteFileError(f"MEAN over {axes} of a {x.dim()}-d tensor is not supported")
            return x.mean(dim=(2, 3))  # NHWC's H and W
        if op.kind == "FULLY_CONNECTED":  # weights [out, in]; the graphs here feed it [N, C]
            bias = self._constants[op.inputs[2]] if len(op.inputs) > 2 and op.inputs[2] >= 0 else None
            return F.linear(x.flatten(1), self._constants[op.inputs[1]], bias)
        if op.kind == "LOGISTIC":
            return torch.sigmoid(x)
        raise TfliteFileError(f"operator {op.kind}")


def _same_pads(x: torch.Tensor, kernel, stride) -> list[int]:  # type: ignore[no-untyped-def]
    """TensorFlow's SAME padding as F.pad's (left, right, top, bottom): any extra pixel goes after."""
    pads = []
    for size, k, s in ((x.shape[3], kernel[1], stride[1]), (x.shape[2], kernel[0], stride[0])):
        out = -(-size // s)
        total = max((out - 1) * s + k - size, 0)
        pads += [total // 2, total - total // 2]
    return pads


def _same_pad(x: torch.Tensor, kernel, stride, value: float = 0.0) -> torch.Tensor:  # type: ignore[no-untyped-def]
    pads = _same_pads(x, kernel, stride)
    return F.pad(x, pads, value=value) if any(pads) else x


def _resize_asymmetric(x: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """TensorFlow's legacy bilinear resize (neither align_corners nor half_pixel_centers): source
    coordinate = destination * in / out."""
    ys = torch.arange(height, device=x.device, dtype=x.dtype) * (x.shape[2] / height)
    xs = torch.arange(width, device=x.device, dtype=x.dtype) * (x.shape[3] / width)
    y0 = ys.floor().long().clamp(max=x.shape[2] - 1)
    x0 = xs.floor().long().clamp(max=x.shape[3] - 1)
    y1, x1 = (y0 + 1).clamp(max=x.shape[2] - 1), (x0 + 1).clamp(max=x.shape[3] - 1)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    top = x[:, :, y0][:, :, :, x0] * (1 - fx) + x[:, :, y0][:, :, :, x1] * fx
    bottom = x[:, :, y1][:, :, :, x0] * (1 - fx) + x[:, :, y1][:, :, :, x1] * fx
    return top * (1 - fy) + bottom * fy


def _activate(x: torch.Tensor, options) -> torch.Tensor:  # type: ignore[no-untyped-def]
    activation = options.get("activation", "NONE")
    if activation == "NONE":
        return x
    if activation == "RELU":
        return F.relu(x)
    if activation == "RELU6":
        return x.clamp(0.0, 6.0)
    raise TfliteFileError(f"fused activation {activation}")
