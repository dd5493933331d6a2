"""Image networks in fp32 against bfloat16 autocast (``hardware.precision``, ``srl_model.training.precision``) and
loaded encoders with batch norms folded into their convs, on one torch thread, as srl_benchmark_small sizes them.

Three workloads, each timed in CPU seconds (``time.process_time``) in alternating rounds so that load from other
processes hits every variant alike; printed: ms per iteration and the speed-up over the first variant.

- ``encoder training``: one Adam step of a keypoint encoder (32 channels, 100 keypoints) and its decoder on a batch of
  32 pairs (64 images of 64 x 64), as srl_splits and the autoencoder train;
- ``encoder in RL``: the states of 8 images (one step of 8 envs) from a loaded encoder: batch norms unfolded, folded,
  folded + bf16;
- ``raw-pixel PPO``: one gradient step of SB3's NatureCNN (64 x 64, batch 256, PPO's minibatch) and a value head.

    python benchmarks/precision_speed.py              # ~1 min
    python benchmarks/precision_speed.py --rounds 2   # smoke run

bf16 pays off where the CPU computes it natively (Intel AMX / AVX-512 BF16: ``rlzoo.precision.fast_bf16``); elsewhere
it is emulated, which this script shows as a speed-up below 1.
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

from rlzoo.precision import fast_bf16
from rlzoo.srl.augment import ShiftedNatureCNN
from rlzoo.srl.networks import ImageDecoder, ImageEncoder, images_to_tensor

SIZE = 64


def encoder_training(precision: str) -> Callable[[], None]:
    """One training step of encoder + decoder at ``precision``."""
    torch.manual_seed(0)
    encoder, decoder = ImageEncoder(SIZE, SIZE, 200, channels=32, keypoints=100), ImageDecoder(200, SIZE, SIZE, 32)
    encoder.precision = decoder.precision = precision
    optimizer = torch.optim.Adam([*encoder.parameters(), *decoder.parameters()], lr=5e-3)
    images = images_to_tensor(np.random.default_rng(0).integers(0, 255, (64, SIZE, SIZE, 3), dtype=np.uint8))

    def step() -> None:
        loss = (decoder(encoder(images)) - images).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def encoder_in_rl(variant: str) -> Callable[[], None]:
    """The states of one batch of 8 images: ``unfused``, ``fused`` or ``fused-bf16``."""
    torch.manual_seed(0)
    encoder = ImageEncoder(SIZE, SIZE, 200, channels=32, keypoints=100).eval()
    if variant != "unfused":
        encoder = copy.deepcopy(encoder).fuse_for_inference()
    encoder.precision = "bf16" if variant.endswith("bf16") else "fp32"
    images = np.random.default_rng(0).integers(0, 255, (8, SIZE, SIZE, 3), dtype=np.uint8)

    def step() -> None:
        with torch.no_grad():
            encoder(images_to_tensor(images))

    return step


def raw_pixel_ppo(precision: str) -> Callable[[], None]:
    """One gradient step of a NatureCNN features extractor and a value head at ``precision``."""
    torch.manual_seed(0)
    space = gym.spaces.Box(0, 255, (3, SIZE, SIZE), np.uint8)
    cnn, head = ShiftedNatureCNN(space, pad=0, precision=precision), torch.nn.Linear(512, 1)
    optimizer = torch.optim.Adam([*cnn.parameters(), *head.parameters()])
    observations = torch.rand(256, 3, SIZE, SIZE)

    def step() -> None:
        loss = head(cnn(observations)).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return step


def measure(name: str, variants: dict[str, Callable[[], None]], iterations: int, rounds: int) -> None:
    """Alternate ``variants`` for ``rounds`` rounds (the first one a warm-up); print CPU ms per iteration."""
    seconds = dict.fromkeys(variants, 0.0)
    for round_ in range(rounds + 1):
        for label, step in variants.items():
            start = time.process_time()
            for _ in range(iterations):
                step()
            if round_:
                seconds[label] += time.process_time() - start
    baseline = next(iter(seconds.values()))
    for label, total in seconds.items():
        per_iteration = total / (rounds * iterations) * 1000
        print(f"{name:18s} {label:12s} {per_iteration:8.2f} ms CPU   speed-up {baseline / total:5.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds per variant (default 5)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, one thread; native bfloat16 on this CPU: {fast_bf16('cpu')}")
    measure("encoder training", {p: encoder_training(p) for p in ("fp32", "bf16")}, 5, args.rounds)
    measure("encoder in RL", {v: encoder_in_rl(v) for v in ("unfused", "fused", "fused-bf16")}, 100, args.rounds)
    measure("raw-pixel PPO", {p: raw_pixel_ppo(p) for p in ("fp32", "bf16")}, 5, args.rounds)


if __name__ == "__main__":
    main()
