"""Algorithms: how an ``algo`` config becomes a checked SB3 (or SB3-compatible) algorithm factory."""

from rlzoo.algos.factory import AlgorithmFactory, build_algorithm_factory

__all__ = ["AlgorithmFactory", "build_algorithm_factory"]
