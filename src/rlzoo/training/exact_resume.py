"""A single-agent run's checkpoint beyond its model, and its restore: the run state (:mod:`rlzoo.training.run_state`)
and the replay buffer's chunks (:mod:`rlzoo.training.buffer_chunks`), so that a resumed run ends where the
uninterrupted run ends.

A checkpoint is taken where a fresh ``learn()`` would go on from (:class:`~rlzoo.training.callbacks.Checkpoint`: at
the start of a rollout, SB3's on- and off-policy algorithms); the restore puts the envs, the model's runtime state and
the buffer back while the run is built, and the generators and SB3's unwritten logger values just before learning
starts (building and claiming the run dir draw from the generators).
"""

from __future__ import annotations

import logging
from pathlib import Path

from stable_baselines3.common.base_class import BaseAlgorithm
from stable_baselines3.common.buffers import ReplayBuffer

from rlzoo.approximation.replay_buffers import PrioritizedReplayBuffer
from rlzoo.checkpoint_format import BUFFER, REPLAY
from rlzoo.rundir import RunDir
from rlzoo.training.buffer_chunks import (
    BufferChunks,
    restore_buffer,
    restore_priorities,
    save_priorities,
    saveable,
)
from rlzoo.training.env_state import capture_envs, envs_saveable, restore_envs, same_format
from rlzoo.training.run_state import (
    Snapshot,
    capture_generators,
    capture_logger,
    capture_model,
    restore_generators,
    restore_logger,
    restore_model,
)

LOG = logging.getLogger("rlzoo")
ENVS_SAVED = "envs_saved"


def _buffer(model: BaseAlgorithm) -> ReplayBuffer | None:
    buffer = getattr(model, "replay_buffer", None)
    return buffer if isinstance(buffer, ReplayBuffer) else None


class RunStateWriter:
    """Writes a checkpoint's run state (and the buffer's new rows) into the checkpoint folder being written.

    :param run: the run dir (its ``replay/`` folder gets the chunks).
    :param keep_buffer: ``checkpoint_buffer``: save the replay buffer.
    :param restored: the run state a resumed run started from (its chunk list goes on).
    """

    def __init__(self, run: RunDir, keep_buffer: bool, restored: Snapshot | None = None) -> None:
        found = restored.get(BUFFER) if restored is not None and keep_buffer else None
        self.chunks = BufferChunks(run.path / REPLAY, found if isinstance(found, dict) else None)
        self.keep_buffer = keep_buffer
        self._warned = False

    def __call__(self, folder: Path, model: BaseAlgorithm) -> None:
        snapshot = Snapshot()
        capture_generators(snapshot)
        env = model.get_env()
        envs_saved = env is not None and capture_envs(snapshot, env)
        snapshot.put(ENVS_SAVED, envs_saved)
        capture_model(snapshot, model, envs_saved)
        capture_logger(snapshot, model)
        buffer = _buffer(model)
        if buffer is not None and self.keep_buffer:
            self._save_buffer(snapshot, buffer, model.num_timesteps)
        snapshot.write(folder)

    def _save_buffer(self, snapshot: Snapshot, buffer: ReplayBuffer, steps: int) -> None:
        if not saveable(buffer):
            if not self._warned:
                LOG.warning(f"checkpoint_buffer: a {type(buffer).__name__} is not saved (rlzoo saves SB3's replay "
                            "buffers and its prioritised one); a resumed run starts with an empty buffer")  # fmt: skip
                self._warned = True
            return
        snapshot.put(BUFFER, self.chunks.save(buffer, steps))
        if isinstance(buffer, PrioritizedReplayBuffer):
            save_priorities(buffer, snapshot.put)


def restore_run_state(folder: Path, run_path: Path, model: BaseAlgorithm, keep_buffer: bool) -> Snapshot | None:
    """Put a checkpoint's envs, runtime state and buffer into the freshly built ``model`` (and its env); return the
    snapshot, whose generators and logger values :func:`finish_restore` sets once learning is about to start (None:
    a checkpoint without run state, resumed as before)."""
    snapshot = Snapshot.read(folder)
    if snapshot is None:
        return None
    env = model.get_env()
    if snapshot.get(ENVS_SAVED) is True and same_format(snapshot) and env is not None and envs_saveable(env):
        restore_envs(snapshot, env)
        restore_model(snapshot, model)
    else:
        restore_model(_without_observations(snapshot), model)  # counters only: the envs start new episodes
        LOG.warning(f"resuming from {folder}: the training envs' state cannot be saved (envs, wrappers and vec "
                    "envs resume exactly when they implement get_state/set_state, docs/resume.md, and could save "
                    "it at the checkpoint): they start new episodes, so this run will not end exactly where an "
                    "uninterrupted one would")  # fmt: skip
    buffer, found = _buffer(model), snapshot.get(BUFFER)
    if buffer is not None and keep_buffer and isinstance(found, dict):
        restore_buffer(buffer, run_path, found)
        if isinstance(buffer, PrioritizedReplayBuffer):
            restore_priorities(buffer, snapshot.get)
    return snapshot


def _without_observations(snapshot: Snapshot) -> Snapshot:
    """The model's counters apply; its last observations do not (the envs are reset)."""
    for key in ("model/_last_obs", "model/_last_original_obs", "model/_last_episode_starts"):
        snapshot.arrays.pop(key, None)
    return snapshot


def finish_restore(snapshot: Snapshot | None, model: BaseAlgorithm) -> None:
    """The generators and SB3's unwritten logger values, set last: nothing draws from the generators between this and
    ``learn()``'s first rollout."""
    if snapshot is not None:
        restore_logger(snapshot, model)
        restore_generators(snapshot)
