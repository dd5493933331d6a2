"""The layer order of rlzoo's packages, lowest first: a module may import its own layer and the layers below it,
never one above, and no import goes in a circle (``tests/test_layers.py`` walks every import and checks both).

======  ==================  ===========================================================================================
layer   name                modules
======  ==================  ===========================================================================================
0       ground floor        errors, files, confined, schema, kwargs_check, hardware, precision, gc_tuning, config,
                            model_files, checkpoint_format, rundir, cli, layers, jax_weights, provenance, registry,
                            untrusted, overrides, progress_lines, stateful, float_path (no rlzoo imports but each
                            other)
1       envs                envs (numpy + gymnasium; its batched vec env adds SB3), the ``rlzoo`` package itself
                            (``rlzoo/__init__.py`` only: every other module must be named by a layer)
2       any_env             any_env: EnvSpec, making any Gymnasium id, observation modes, extras
3       srl                 srl: representations, encoders, losses, datasets, metrics
4       approximation       approximation: building blocks of algorithms (approximations, Q-networks, replay, K-FAC)
5       algos               algos: the algorithm factory, algorithms SB3 lacks, the JAX backend
6       loggers             loggers: SB3 logger outputs, W&B, visdom live plots
7       training            training: plan, build, budget, callbacks, resume (run state, replay chunks), fine-tune,
                            the kinds of run (protocol, registry, resolver), the one run skeleton
8       results, playback   results (reading many runs), playback (loading one trained run, plots, videos)
9       agents              agents: the agent API (state, presets, training agents, test agents)
10      single_agent        single_agent: the single-agent kind of run, how its runs learn, run_experiment
11      multiagent          multiagent: PettingZoo adapter, multi-agent state, agents, learners, plan, the
                            multi-agent kind of run and its checkpoints' run state
12      kinds               kinds: every kind's package imported (so registered), load_agent
13      tune, reporting     tune (Optuna studies), reporting (figures, report page)
14      entrypoints         train, collect, enjoy, plot, report, srl.train, srl.evaluate, tune.command, pipeline,
                            records
======  ==================  ===========================================================================================
"""

from __future__ import annotations

# Module prefixes of each layer, lowest first; a module belongs to the layer of its longest matching prefix. The bare
# package name matches the package's own ``__init__`` only (PACKAGE), so a module no layer names has no layer.
PACKAGE = "rlzoo"
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "ground floor",
        (
            "rlzoo.errors",
            "rlzoo.files",
            "rlzoo.confined",
            "rlzoo.schema",
            "rlzoo.kwargs_check",
            "rlzoo.hardware",
            "rlzoo.precision",
            "rlzoo.gc_tuning",
            "rlzoo.config",
            "rlzoo.model_files",
            "rlzoo.checkpoint_format",
            "rlzoo.rundir",
            "rlzoo.cli",
            "rlzoo.layers",
            "rlzoo.jax_weights",
            "rlzoo.provenance",
            "rlzoo.registry",
            "rlzoo.untrusted",
            "rlzoo.overrides",
            "rlzoo.progress_lines",
            "rlzoo.stateful",
            "rlzoo.float_path",
        ),
    ),
    ("envs", (PACKAGE, "rlzoo.envs")),
    ("any_env", ("rlzoo.any_env",)),
    ("srl", ("rlzoo.srl",)),
    ("approximation", ("rlzoo.approximation",)),
    ("algos", ("rlzoo.algos",)),
    ("loggers", ("rlzoo.loggers",)),
    ("training", ("rlzoo.training",)),
    ("results, playback", ("rlzoo.results", "rlzoo.playback")),
    ("agents", ("rlzoo.agents",)),
    ("single_agent", ("rlzoo.single_agent",)),
    ("multiagent", ("rlzoo.multiagent",)),
    ("kinds", ("rlzoo.kinds",)),
    ("tune, reporting", ("rlzoo.tune", "rlzoo.reporting")),
    (
        "entrypoints",
        (
            "rlzoo.train",
            "rlzoo.collect",
            "rlzoo.enjoy",
            "rlzoo.plot",
            "rlzoo.report",
            "rlzoo.srl.train",
            "rlzoo.srl.evaluate",
            "rlzoo.tune.command",
            "rlzoo.tune.__main__",
            "rlzoo.pipeline",
            "rlzoo.records",
        ),
    ),
)


def layer_of(module: str) -> int:
    """The layer number of ``module`` (a dotted name inside ``rlzoo``), by its longest matching prefix.

    :raise KeyError: a module no layer names.
    """
    best, best_length = -1, -1
    for number, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = module == prefix or (prefix != PACKAGE and module.startswith(prefix + "."))
            if matches and len(prefix) > best_length:
                best, best_length = number, len(prefix)
    if best < 0:
        raise KeyError(f"{module} is in no layer of rlzoo.layers.LAYERS")
    return best
