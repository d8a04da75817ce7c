"""Exports the real-model bench's models with torch's own exporter (the legacy TorchScript path,
`torch.onnx.export(..., dynamo=False)`, so each model is one self-contained file with no external
data), random weights (`weights=None`, torch's default initialisation under a fixed seed), in eval
mode, one file per batch size: `NAME.onnx` for batch 1 and `NAME_b8.onnx` for batch 8, plus the
input each was checked with (`NAME[_b8].input.npy`, seeded).

Usage: bench-models.py OUTDIR   (run with the bench environment's python, scripts/bench-env.sh)

Models: torchvision resnet18 and mobilenet_v2 at 224x224; a 2-layer LSTM (input 16, hidden 32,
12 steps, sequence-first as torch's default); nn.TransformerEncoder (2 layers, d_model 64, 4 heads,
feed-forward 256, sequence 32, batch-first); and "oddnet", a small CNN whose channel counts are not
multiples of 8 (3 -> 24 -> 40 -> 100 convs with batch norm, ReLU and max-pool, a global average
pool and a 100 -> 10 linear head, 96x96 input), so no layer lands on a vector width by luck."""
import os
import sys

import numpy as np
import torch
from torch import nn

SEED = 0


class LstmNet(nn.Module):
    """The LSTM's output sequence only (the final states are left out, as a user keeps `out`)."""

    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(16, 32, num_layers=2)

    def forward(self, x):
        out, _ = self.lstm(x)
        return out


def oddnet():
    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.ReLU()]

    return nn.Sequential(
        *block(3, 24), nn.MaxPool2d(2),
        *block(24, 40), nn.MaxPool2d(2),
        *block(40, 100), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(100, 10),
    )


def transformer():
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=256, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


def models():
    """(name, module maker, input shape maker by batch)."""
    import torchvision

    return [
        ("resnet18", lambda: torchvision.models.resnet18(weights=None), lambda b: (b, 3, 224, 224)),
        ("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None), lambda b: (b, 3, 224, 224)),
        ("lstm", LstmNet, lambda b: (12, b, 16)),
        ("transformer", transformer, lambda b: (b, 32, 64)),
        ("oddnet", oddnet, lambda b: (b, 3, 96, 96)),
    ]


def export(name, make, shape, batch, outdir):
    torch.manual_seed(SEED)
    model = make().eval()
    rng = np.random.default_rng(SEED + batch)
    x = rng.standard_normal(shape(batch)).astype(np.float32)
    stem = name if batch == 1 else f"{name}_b{batch}"
    path = os.path.join(outdir, f"{stem}.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x),), path, input_names=["x"], output_names=["y"],
                          opset_version=17, dynamo=False)
    np.save(os.path.join(outdir, f"{stem}.input.npy"), x)
    print(f"{path}: input {list(x.shape)}", flush=True)


def main():
    # The legacy exporter has no symbolic for the eval-mode "fast path" kernel of
    # nn.TransformerEncoderLayer (aten::_transformer_encoder_layer_fwd): turned off, the layer runs
    # (and exports) as its ordinary ops, the same arithmetic.
    torch.backends.mha.set_fastpath_enabled(False)
    outdir = sys.argv[1] if len(sys.argv) > 1 else "target/bench-models"
    os.makedirs(outdir, exist_ok=True)
    for name, make, shape in models():
        for batch in (1, 8):
            export(name, make, shape, batch, outdir)


if __name__ == "__main__":
    main()
