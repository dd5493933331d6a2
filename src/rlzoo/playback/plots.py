"""The figures of ``python -m rlzoo.enjoy run=<dir> plot=[...]``: the robot's trajectories (1-D and 2-D for the
MobileRobot family, 3-D for the arm's gripper) and the actions or action probabilities per step."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from gymnasium import spaces
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from rlzoo.playback.loading import Episode

# Distinct target positions of one episode above which they are drawn as a path (a moving button), not as stars.
MAX_TARGET_MARKS = 4


def trajectory_figure(episodes: Sequence[Episode], title: str) -> Figure:
    """The robot's path in ground-truth space, one line per episode (start: circle, end: cross), targets: stars.

    Positions of 3 values (the arm's gripper ``(x, y, z)``) are drawn on 3-D axes, the target being the pressed
    button's top; 1 value: position over steps; 2 values: the plane.
    """
    robot = episodes[0].robot
    assert robot is not None
    if robot.shape[1] == 3:
        return _trajectory_figure_3d(episodes, title)
    fig = Figure(figsize=(6, 6), layout="constrained")
    ax = fig.subplots()
    for i, episode in enumerate(episodes):
        assert episode.robot is not None
        xy = episode.robot if episode.robot.shape[1] > 1 else np.c_[np.arange(len(episode.robot)), episode.robot]
        (line,) = ax.plot(xy[:, 0], xy[:, 1], lw=1.2, alpha=0.8, label=f"episode {i}: return {episode.ret:.1f}")
        ax.plot(*xy[0, :2], "o", color=line.get_color(), ms=6)
        ax.plot(*xy[-1, :2], "x", color=line.get_color(), ms=7)
        if episode.targets is not None and episode.robot.shape[1] > 1:
            targets = np.unique(np.round(episode.targets[:, :2], 6), axis=0)
            ax.plot(targets[:, 0], targets[:, 1], "*", color=line.get_color(), ms=16, mec="black")
    one_d = robot.shape[1] == 1
    ax.set(xlabel="step" if one_d else "x (ground truth)", ylabel="position" if one_d else "y (ground truth)")
    if not one_d:
        ax.set_aspect("equal", adjustable="datalim")
    _finish(ax, episodes, title, "target: star")
    return fig


def _trajectory_figure_3d(episodes: Sequence[Episode], title: str) -> Figure:
    """The gripper's (x, y, z) path per episode on 3-D axes; the goal button's top as a star (a moving button: its
    path, dotted, with a star where the episode ends)."""
    fig = Figure(figsize=(7, 6.5), layout="constrained")
    ax = fig.add_subplot(projection="3d")
    for i, episode in enumerate(episodes):
        assert episode.robot is not None
        xyz = episode.robot
        (line,) = ax.plot(*xyz.T, lw=1.2, alpha=0.8, label=f"episode {i}: return {episode.ret:.1f}")
        color = line.get_color()
        ax.plot(*xyz[0, :, None], "o", color=color, ms=6)
        ax.plot(*xyz[-1, :, None], "x", color=color, ms=7)
        if episode.targets is None:
            continue
        targets = np.unique(np.round(episode.targets, 6), axis=0)
        if len(targets) > MAX_TARGET_MARKS:  # the button moves
            ax.plot(*episode.targets.T, ":", color=color, lw=1.5)
            targets = episode.targets[-1:]
        ax.plot(*targets.T, "*", color=color, ms=16, mec="black")
    ax.set(xlabel="x (m)", ylabel="y (m)", zlabel="z (m)")
    _finish(ax, episodes, title, "button: star")
    return fig


def _finish(ax: Axes, episodes: Sequence[Episode], title: str, target: str) -> None:
    ax.set_title(f"Trajectories: {title}\nstart: circle, end: cross, {target}", fontsize=10)
    ax.grid(alpha=0.3)
    if len(episodes) <= 10:
        ax.legend(fontsize=8, loc="best")


def plot_trajectories(episodes: Sequence[Episode], title: str, path: Path) -> Path:
    """Write :func:`trajectory_figure` to ``path`` (PNG)."""
    trajectory_figure(episodes, title).savefig(path, dpi=100)
    return path


def plot_actions(
    episodes: Sequence[Episode], action_space: spaces.Space, title: str, path: Path, max_episodes: int = 3
) -> Path:
    """Per step, the probability of each discrete action; or the action taken, for policies without a distribution
    (DQN, ARS, recurrent policies) and continuous actions (one line per dimension). One panel per episode (the
    first ``max_episodes``)."""
    shown = list(episodes[:max_episodes])
    fig = Figure(figsize=(8, 2.4 * len(shown) + 0.6), layout="constrained")
    axes = fig.subplots(len(shown), 1, sharex=True, squeeze=False)[:, 0]
    n_discrete = int(action_space.n) if isinstance(action_space, spaces.Discrete) else None
    for i, (ax, episode) in enumerate(zip(axes, shown, strict=True)):
        steps = np.arange(episode.length)
        if episode.probabilities is not None:
            for k in range(episode.probabilities.shape[1]):
                ax.plot(steps, episode.probabilities[:, k], lw=1.2, drawstyle="steps-post", label=f"action {k}")
            ax.set(ylabel="probability", ylim=(-0.02, 1.02))
        elif n_discrete is not None:
            ax.plot(steps, episode.actions, lw=1.2, drawstyle="steps-post", marker=".", label="action taken")
            ax.set(ylabel="action", yticks=range(n_discrete), ylim=(-0.3, n_discrete - 0.7))
        else:
            values = episode.actions.reshape(episode.length, -1)
            for k in range(values.shape[1]):
                ax.plot(steps, values[:, k], lw=1.2, drawstyle="steps-post", label=f"action[{k}]")
            ax.set_ylabel("action")
        ax.set_title(f"episode {i}: return {episode.ret:.1f}", fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, ncol=6, loc="upper right")
    axes[-1].set_xlabel("step")
    what = "Action probabilities" if shown[0].probabilities is not None else "Actions taken"
    fig.suptitle(f"{what}: {title}", fontsize=10)
    fig.savefig(path, dpi=100)
    return path
