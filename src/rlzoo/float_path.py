"""One floating-point kernel path on every x86-64 CPU that has it (ground floor: no rlzoo imports, no torch).

``RLZOO_FLOAT_PATH=avx2``, set before Python starts, caps the kernels torch dispatches at AVX2 (ATen's
``ATEN_CPU_CAPABILITY``, MKL's conditional numerical reproducibility ``MKL_CBWR``, oneDNN's ``ONEDNN_MAX_CPU_ISA``), so
that a run computes the same floats on every x86-64 CPU with AVX2 and FMA, whatever more it offers (AVX-512, AMX).
``native`` (the default) lets each library pick the fastest path of the CPU. The libraries read these variables
when they first dispatch a kernel, so ``import rlzoo`` sets them before anything imports torch; a process that
imported torch first keeps what torch chose. ``benchmarks/fingerprint.py`` measures what each path gives and costs
(docs/results.md).
"""

from __future__ import annotations

from collections.abc import MutableMapping

FLOAT_PATH = "RLZOO_FLOAT_PATH"
PATHS: dict[str, dict[str, str]] = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_CBWR": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
PINNED = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "ONEDNN_MAX_CPU_ISA")


def pin_float_path(environ: MutableMapping[str, str]) -> str:
    """Set the kernel caps of the path ``environ`` names in :data:`FLOAT_PATH`; return the path's name.

    :raise SystemExit: one line naming the value and the allowed ones.
    """
    name = environ.get(FLOAT_PATH, "native")
    if name not in PATHS:
        raise SystemExit(f"rlzoo: {FLOAT_PATH}={name!r} is not a float path; allowed: {', '.join(PATHS)}")
    environ.update(PATHS[name])
    return name


def float_path_facts(environ: MutableMapping[str, str]) -> dict[str, str]:
    """The path and the caps in force, as a run records them (``provenance.json``)."""
    facts = {"float_path": environ.get(FLOAT_PATH, "native")}
    facts |= {name.lower(): environ.get(name, "unset") for name in PINNED}
    return facts
