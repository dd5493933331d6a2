"""Does an arm env's state, saved and set into another env of the same config, continue bit for bit? And does
PyBullet's ``.bullet`` file parser refuse a damaged file? Needs the extra: ``pip install -e ".[arm]"``.

1. Restores: random episodes biased downwards (so that the gripper meets the buttons and the table), random buttons,
   300-step episodes. At every ``--every``-th step, and at every step with a contact point, the state is saved
   (:func:`rlzoo.envs.kuka_state.capture`, and ``pybullet.saveBullet``), set into another env of the same config
   (an env built and reset once, as a resumed run's, or one that has run episodes before), by the numbers through
   PyBullet's API (:func:`rlzoo.envs.kuka_state.restore`) or by ``restoreState(fileName=)`` with the episode's own
   values; both envs then take the same actions for ``--horizon`` steps (resets included) and their observations,
   rewards and episode ends are compared bit for bit. The saved env goes back to its state through PyBullet's
   in-memory snapshot.
2. The parser: the files of a run cut short at random lengths, with a few bytes changed, random data, and a valid
   header followed by random data, each restored in a child process: refused (``pybullet.error``), accepted, or the
   process killed by a signal.

    python benchmarks/arm_restore.py                        # ~6 min on 2 cores
    python benchmarks/arm_restore.py --steps 300 --files 3  # smoke run
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import rlzoo.envs  # noqa: F401  (registers the ids)
from rlzoo.envs import kuka_state
from rlzoo.envs.kuka_button import KukaButtonEnv
from rlzoo.envs.kuka_pybullet import p

CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "KukaButton discrete": ("rlzoo/KukaButton-v0", {}),
    "KukaButton continuous": ("rlzoo/KukaButton-v0", {"continuous": True}),
    "KukaButton joints": ("rlzoo/KukaButton-v0", {"action_joints": True}),
    "Kuka2Button discrete": ("rlzoo/Kuka2Button-v0", {}),
    "KukaMovingButton continuous": ("rlzoo/KukaMovingButton-v0", {"continuous": True}),
}
WAYS = ("fresh/api", "fresh/file", "used/api", "used/file")
Trace = list[tuple[Any, ...]]


def make(env_id: str, kwargs: dict[str, Any]) -> KukaButtonEnv:
    env = gym.make(env_id, random_target=True, max_steps=300, **kwargs).unwrapped
    assert isinstance(env, KukaButtonEnv)
    return env


def biased_actions(env: KukaButtonEnv, n: int, rng: np.random.Generator) -> list[Any]:
    """Random actions that go down more often than up."""
    if env.action_mode == "discrete":
        return [4 if rng.random() < 0.6 else int(rng.integers(6)) for _ in range(n)]
    size = 3 if env.action_mode == "cartesian" else 7
    bias = np.zeros(size)
    bias[2 if size == 3 else 1] = -0.8 if size == 3 else 0.5
    return [np.clip(rng.normal(size=size) * 0.5 + bias, -1, 1).astype(np.float32) for _ in range(n)]


def trace(env: KukaButtonEnv, actions: list[Any]) -> Trace:
    out: Trace = []
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(action)
        out.append((observation.tobytes(), reward, terminated, truncated))
        if terminated or truncated:
            env.reset()
    return out


def contact(env: KukaButtonEnv) -> bool:
    return kuka_state.in_contact(env)


def measure(name: str, steps: int, every: int, horizon: int, seed: int) -> dict[str, dict[str, list[int]]]:
    """For each way and contact / no contact at the save: [save points, restores that differ]."""
    env_id, kwargs = CONFIGS[name]
    rng = np.random.default_rng(seed)
    saved_env, used = make(env_id, kwargs), make(env_id, kwargs)
    saved_env.reset(seed=seed)
    used.reset(seed=seed + 1)
    actions = biased_actions(saved_env, steps + horizon, rng)
    counts: dict[str, dict[str, list[int]]] = {way: {"no contact": [0, 0], "contact": [0, 0]} for way in WAYS}
    with tempfile.TemporaryDirectory() as folder:
        path = str(Path(folder) / "state.bullet")
        for t in range(steps):
            _, _, terminated, truncated, _ = saved_env.step(actions[t])
            if terminated or truncated:
                saved_env.reset()
                continue
            touching = contact(saved_env)
            if t % every and not touching:
                continue
            client = saved_env.scene.client
            snapshot = p.saveState(physicsClientId=client)
            p.saveBullet(path, physicsClientId=client)
            arrays = kuka_state.capture(saved_env)
            generator = copy.deepcopy(saved_env.np_random.bit_generator.state)
            reference = trace(saved_env, actions[t + 1 : t + 1 + horizon])
            for way in WAYS:
                target = make(env_id, kwargs) if way.startswith("fresh") else used
                target.reset(seed=int(rng.integers(1000)))
                if way.endswith("api"):
                    kuka_state.restore(target, arrays)
                else:
                    p.restoreState(fileName=path, physicsClientId=target.scene.client)
                    kuka_state.restore_episode(target, arrays)
                target.np_random.bit_generator.state = copy.deepcopy(generator)
                row = counts[way]["contact" if touching else "no contact"]
                row[0] += 1
                row[1] += trace(target, actions[t + 1 : t + 1 + horizon]) != reference
                if target is not used:
                    target.close()
            p.restoreState(stateId=snapshot, physicsClientId=client)
            p.removeState(snapshot)
            kuka_state.restore_episode(saved_env, arrays)
            saved_env.np_random.bit_generator.state = generator
    saved_env.close()
    used.close()
    return counts


def damaged_files(good: bytes, n: int, rng: np.random.Generator) -> dict[str, list[bytes]]:
    def flipped() -> bytes:
        data = bytearray(good)
        for i in rng.integers(0, len(data), size=int(rng.integers(1, 20))):
            data[int(i)] = int(rng.integers(256))
        return bytes(data)

    def noise() -> bytes:
        return bytes(rng.integers(0, 256, size=int(rng.integers(0, 5000)), dtype=np.uint8))

    makers: dict[str, Callable[[], bytes]] = {
        "cut short": lambda: good[: int(rng.integers(0, len(good)))],
        "a few bytes changed": flipped,
        "random data": noise,
        "header, then random data": lambda: good[:12] + noise(),
    }
    return {kind: [maker() for _ in range(n)] for kind, maker in makers.items()}


def parse_files(n: int, seed: int) -> dict[str, dict[str, int]]:
    """Restore damaged files in child processes: refused, accepted, or killed by a signal."""
    env = make("rlzoo/KukaButton-v0", {})
    env.reset(seed=seed)
    for action in biased_actions(env, 100, np.random.default_rng(seed)):
        env.step(action)
    results: dict[str, dict[str, int]] = {}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "state.bullet"
        p.saveBullet(str(path), physicsClientId=env.scene.client)
        env.close()
        for kind, files in damaged_files(path.read_bytes(), n, np.random.default_rng(seed)).items():
            tally = results.setdefault(kind, {"refused": 0, "accepted": 0, "crashed": 0})
            for data in files:
                path.write_bytes(data)
                child = subprocess.run([sys.executable, __file__, "--parse", str(path)], capture_output=True)
                said = child.stdout.decode()  # PyBullet prints to the same stdout, without a newline
                outcome = next((word for word in ("refused", "accepted") if said.endswith(word + "\n")), "crashed")
                tally[outcome if child.returncode == 0 else "crashed"] += 1
    return results


def parse_one(path: str) -> None:
    env = make("rlzoo/KukaButton-v0", {})
    env.reset(seed=0)
    try:
        p.restoreState(fileName=path, physicsClientId=env.scene.client)
    except p.error:
        print("refused")
        return
    print("accepted")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=2000, help="agent steps of each config's episodes")
    parser.add_argument("--every", type=int, default=50, help="save every this many steps (and at every contact)")
    parser.add_argument("--horizon", type=int, default=100, help="steps compared after each restore")
    parser.add_argument("--files", type=int, default=25, help="damaged files of each kind")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--parse", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.parse:
        parse_one(args.parse)
        return
    print(f"pybullet {version('pybullet')}; {args.horizon} steps compared after each restore")
    total = {way: {"no contact": [0, 0], "contact": [0, 0]} for way in WAYS}
    for index, name in enumerate(CONFIGS):
        counts = measure(name, args.steps, args.every, args.horizon, args.seed + index)
        print(name, json.dumps(counts))
        for way in WAYS:
            for key, (saves, differ) in counts[way].items():
                total[way][key][0] += saves
                total[way][key][1] += differ
    print("| state set into / how | no contact at the save | contact at the save |\n|---|---|---|")
    for way in WAYS:
        cells = [f"{differ} of {saves} differ" for saves, differ in total[way].values()]
        print(f"| {way} | {' | '.join(cells)} |")
    print("damaged .bullet files:", json.dumps(parse_files(args.files, args.seed)))


if __name__ == "__main__":
    main()
