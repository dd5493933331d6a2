"""The committed store of result records (``benchmarks/results/srl_benchmark_small``) and the docs built from it:
``docs/results.md``'s ten-seed table is the store's table, figure for figure, and the store holds each
(representation, seed) of the experiment's sweep at most once, every missing one named in the docs."""

from __future__ import annotations

import re
from pathlib import Path

from extras import require_extra
from rlzoo.records import experiment_axes
from rlzoo.reporting.store_table import (
    EFFICIENCY,
    PROFILE,
    missing_line,
    missing_pairs,
    read_store_info,
    section_of,
    store_table,
)
from rlzoo.results.records import check_records, store_records

ROOT = Path(__file__).resolve().parents[1]
STORE = ROOT / "benchmarks" / "results" / "srl_benchmark_small"
RESULTS = ROOT / "docs" / "results.md"


def test_the_docs_table_and_figures_are_the_stores(tmp_path: Path) -> None:
    """The table (with its % of ground truth and sample-efficiency rows) and, byte for byte, the performance profile
    and the sample-efficiency curves (fixed bootstrap seeds; matplotlib's PNG holds no date)."""
    require_extra("rliable", "stats")
    representations, seeds = experiment_axes(read_store_info(STORE).experiment)
    expected = store_table(STORE, representations, seeds, tmp_path)
    documented = section_of(RESULTS.read_text())
    assert documented, "docs/results.md has no store table section"
    rebuild = "python -m rlzoo.records action=table docs=docs/results.md"
    assert documented == expected, f"docs/results.md differs from the store; rebuild it: {rebuild}"
    for figure in (PROFILE, EFFICIENCY):
        committed = RESULTS.parent / figure
        assert committed.is_file(), f"docs/{figure} is missing; rebuild it: {rebuild}"
        assert (tmp_path / figure).read_bytes() == committed.read_bytes(), f"docs/{figure} differs; {rebuild}"


def test_the_store_holds_each_pair_of_the_sweep_once_and_the_docs_name_the_missing() -> None:
    info = read_store_info(STORE)
    representations, seeds = experiment_axes(info.experiment)
    records = store_records(STORE)
    check_records(records)  # none twice, one config and one encoder per representation
    outside = [r.name for r in records if r.representation not in representations or r.seed not in seeds]
    assert outside == []
    assert {str(r.info["commit"]) for r in records} == {info.commit}  # every record at the store's one commit
    line = re.search(r"^Missing: (.*)\.$", section_of(RESULTS.read_text()), re.MULTILINE)
    assert line is not None, "docs/results.md's store table has no Missing: line"
    assert missing_line(missing_pairs(records, representations, seeds)) == line.group(1)


def test_a_missing_record_is_named(tmp_path: Path) -> None:
    """The check above fails, naming the pair, when a record goes missing."""
    records = store_records(STORE)
    representations, seeds = experiment_axes(read_store_info(STORE).experiment)
    assert records, "the store holds no record"
    fewer = records[1:]
    pair = (records[0].representation, records[0].seed)
    assert pair in missing_pairs(fewer, representations, seeds)
    assert pair not in missing_pairs(records, representations, seeds)
    assert f"{pair[0]} seed" in missing_line(missing_pairs(fewer, representations, seeds))
