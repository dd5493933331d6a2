"""Fingerprints of a short run of the store's experiment per floating-point mode, and what each mode costs.

    python benchmarks/fingerprint.py                      # 20k steps, ground truth and the autoencoder, both modes
    python benchmarks/fingerprint.py --steps 4000 --kinds native,avx2   # also as an AVX2 machine would dispatch

Each run is ``python -m rlzoo.train experiment=srl_benchmark_small`` (PPO, 8 batched MobileRobot envs, seed 0) for
``--steps`` agent steps in a fresh child process: on ground truth, and on the store's autoencoder (its weights from
``benchmarks/results/srl_benchmark_small/encoders``). A mode is a set of environment variables read when torch, MKL
and oneDNN first dispatch a kernel:

* ``default``: none (each library picks the fastest path this CPU has);
* ``portable``: one path on every x86-64 CPU: ATen's scalar kernels (``ATEN_CPU_CAPABILITY=default``), MKL's
  conditional numerical reproducibility (``MKL_CBWR=COMPATIBLE``), oneDNN capped at SSE4.1
  (``ONEDNN_MAX_CPU_ISA=SSE41``);
* ``pinned-avx2``: one path on every x86-64 CPU with AVX2 and FMA (Intel since 2013, AMD since 2015): ATen, MKL and
  oneDNN capped at AVX2.

A kind (``--kinds``) emulates another CPU's dispatch on this one: ``native`` (nothing), ``avx2`` (ATen, MKL and
oneDNN capped at AVX2, as on an x86 CPU without AVX-512). A mode's variables win over a kind's. Runs alternate the
modes within each round (``--repeats``), so that the cost ratio is measured in one run. Printed and appended to
``benchmarks/results/fingerprints.csv``: the platform (:func:`rlzoo.provenance.platform_label`), kind, mode,
setting, the SHA-256 of the training episodes (return and length of every episode of every env, in order) and of the
final weights, and the median wall and CPU seconds; the 1-minute load average at the start.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "benchmarks" / "results" / "srl_benchmark_small"
OUT = ROOT / "benchmarks" / "results" / "fingerprints.csv"
ENCODER = "autoencoder-MobileRobot-f15a2a60d1a4"
MODES = {
    "default": {},
    "portable": {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    "pinned-avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
KINDS = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
SETTINGS = {
    "ground_truth": ["srl_model=ground_truth"],
    "autoencoder": ["srl_model=autoencoder", f"srl_model.checkpoint={STORE / 'encoders' / ENCODER}"],
}
FIELDS = ("platform", "kind", "mode", "setting", "steps", "episodes_sha256", "weights_sha256", "wall_s", "cpu_s",
          "load_1min")  # fmt: skip


def episodes_hash(run: Path) -> str:
    """SHA-256 of every training episode's return and length, env by env in rank order."""
    digest = hashlib.sha256()
    for log in sorted((run / "monitor").glob("*.monitor.csv"), key=lambda p: int(p.name.split(".")[0])):
        for line in log.read_text().splitlines()[2:]:
            digest.update((",".join(line.split(",")[:2]) + "\n").encode())
    return digest.hexdigest()


def weights_hash(run: Path) -> str:
    """SHA-256 of the final policy's tensors (``model.zip``'s ``policy.pth``, read weights-only)."""
    import torch

    from rlzoo.results.records import tensor_hash

    with zipfile.ZipFile(run / "model.zip") as archive:
        state = torch.load(io.BytesIO(archive.read("policy.pth")), map_location="cpu", weights_only=True)
    return tensor_hash((name, tensor.float().numpy()) for name, tensor in state.items())


def train_once(setting: str, environment: dict[str, str], steps: int, folder: Path) -> tuple[float, float]:
    """One run in a child process; its (wall, CPU) seconds."""
    command = [sys.executable, "-m", "rlzoo.train", "experiment=srl_benchmark_small", *SETTINGS[setting], "seed=0",
               f"total_timesteps={steps}", "checkpoint_freq=0", "test_episodes=0", "progress_bar=false",
               f"run_dir={folder}", "hardware=cpu"]  # fmt: skip
    started = time.perf_counter()
    with (folder.parent / f"{folder.name}.log").open("w") as log:
        child = subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        _, status, usage = os.wait4(child.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"fingerprint: {setting} failed; see {folder.parent / f'{folder.name}.log'}")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def measure(args: argparse.Namespace, scratch: Path) -> list[dict[str, str]]:
    from rlzoo.provenance import platform_facts, platform_label

    label = platform_label(platform_facts())
    load = f"{os.getloadavg()[0]:.2f}"
    times: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    hashes: dict[tuple[str, str, str], tuple[str, str]] = {}
    for round_index in range(args.repeats):
        for kind in args.kinds.split(","):
            for setting in args.settings.split(","):
                for mode in args.modes.split(","):
                    key = (kind, mode, setting)
                    folder = scratch / f"{kind}-{mode}-{setting}-{round_index}"
                    environment = {**os.environ, **KINDS[kind], **MODES[mode]}
                    times.setdefault(key, []).append(train_once(setting, environment, args.steps, folder))
                    found = (episodes_hash(folder), weights_hash(folder))
                    if hashes.setdefault(key, found) != found:
                        print(f"fingerprint: {key} gave two fingerprints in one process kind: not deterministic")
    return [
        {"platform": label, "kind": kind, "mode": mode, "setting": setting, "steps": str(args.steps),
         "episodes_sha256": hashes[key][0][:16], "weights_sha256": hashes[key][1][:16],
         "wall_s": f"{statistics.median(t[0] for t in runs):.1f}",
         "cpu_s": f"{statistics.median(t[1] for t in runs):.1f}", "load_1min": load}
        for key, runs in times.items()
        for kind, mode, setting in [key]
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--modes", default="default,portable")
    parser.add_argument("--kinds", default="native,avx2")
    parser.add_argument("--settings", default="ground_truth,autoencoder")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlzoo-fingerprint-") as scratch:
        rows = measure(args, Path(scratch))
    new = not args.out.is_file()
    with args.out.open("a", newline="") as stream:
        writer = csv.DictWriter(stream, FIELDS)
        if new:
            writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        print(json.dumps(row))
    by_key = {(r["kind"], r["mode"], r["setting"]): r for r in rows}
    for kind in args.kinds.split(","):
        for setting in args.settings.split(","):
            default, portable = by_key.get((kind, "default", setting)), by_key.get((kind, "portable", setting))
            if default and portable:
                ratio = float(portable["cpu_s"]) / float(default["cpu_s"])
                print(f"fingerprint: {kind} {setting}: portable / default CPU seconds {ratio:.3f}")
            pinned = by_key.get((kind, "pinned-avx2", setting))
            if default and pinned:
                ratio = float(pinned["cpu_s"]) / float(default["cpu_s"])
                print(f"fingerprint: {kind} {setting}: pinned-avx2 / default CPU seconds {ratio:.3f}")


if __name__ == "__main__":
    main()
