"""The committed store of result records (``benchmarks/results/srl_benchmark_small``) and the docs built from it:
``docs/results.md``'s ten-seed table is the store's table, figure for figure, and the store holds each
(representation, seed) of the experiment's sweep at most once, every missing one named in the docs."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
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


def blob_ids(folder: Path) -> dict[str, str]:
    """Git's blob id of every file of a store's ``runs/``, by its path there (what ``git ls-tree`` lists)."""
    runs = folder / "runs"
    return {
        str(path.relative_to(runs)): hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        for path in sorted(runs.rglob("*"))
        if path.is_file() and (data := path.read_bytes()) is not None
    }


def committed_blob_ids() -> dict[str, str]:
    """The same of the store as last committed (empty outside a git checkout)."""
    listed = subprocess.run(["git", "ls-tree", "-r", "HEAD", "--", str(STORE / "runs")], cwd=ROOT,
                            capture_output=True, text=True, check=False).stdout  # fmt: skip
    ids = {}
    for line in listed.splitlines():
        meta, path = line.split("\t", 1)
        ids[str(Path(path).relative_to(STORE.relative_to(ROOT) / "runs"))] = meta.split()[2]
    return ids


def drifted_records(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """The records (``<representation>_seed<N>``) with a file added, missing or changed between two listings."""
    changed = {path for path in set(before) | set(after) if before.get(path) != after.get(path)}
    return sorted({path.split("/")[0] for path in changed})


def drift_message(expected: str, documented: str) -> str:
    """Why the docs' table differs from the store's: the records changed since the last commit and the first line
    that differs."""
    pairs = zip(expected.splitlines(), documented.splitlines(), strict=False)
    first = next(((new, old) for new, old in pairs if new != old), ("(one table is longer)", ""))
    names = drifted_records(committed_blob_ids(), blob_ids(STORE)) if committed_blob_ids() else []
    return (
        f"docs/results.md differs from the store; records changed, added or missing since the last commit: "
        f"{', '.join(names) or 'none (the code making the table changed)'}; first differing line: store "
        f"{first[0][:150]!r}, docs {first[1][:150]!r}; rebuild it: python -m rlzoo.records action=table "
        "docs=docs/results.md"
    )


def test_the_docs_table_and_figures_are_the_stores(tmp_path: Path) -> None:
    """The table (with its % of ground truth and sample-efficiency rows) and, byte for byte, the performance profile
    and the sample-efficiency curves (fixed bootstrap seeds; matplotlib's PNG holds no date)."""
    require_extra("rliable", "stats")
    representations, seeds = experiment_axes(read_store_info(STORE).experiment)
    expected = store_table(STORE, representations, seeds, tmp_path)
    documented = section_of(RESULTS.read_text())
    assert documented, "docs/results.md has no store table section"
    rebuild = "python -m rlzoo.records action=table docs=docs/results.md"
    assert documented == expected, drift_message(expected, documented)
    for figure in (PROFILE, EFFICIENCY):
        committed = RESULTS.parent / figure
        assert committed.is_file(), f"docs/{figure} is missing; rebuild it: {rebuild}"
        assert (tmp_path / figure).read_bytes() == committed.read_bytes(), f"docs/{figure} differs; {rebuild}"


def test_a_changed_or_missing_record_is_named_by_the_drift_message(tmp_path: Path) -> None:
    """The drift message's record names: one record's scores changed, another removed, both named; no other."""
    store = tmp_path / "store"
    shutil.copytree(STORE / "runs", store / "runs")
    before = blob_ids(store)
    first, second, *_ = sorted(p.name for p in (store / "runs").iterdir())
    metrics = store / "runs" / first / "metrics.json"
    metrics.write_text(metrics.read_text().replace("1", "2", 1))
    shutil.rmtree(store / "runs" / second)
    assert drifted_records(before, blob_ids(store)) == [first, second]
    assert drifted_records(before, before) == []


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
