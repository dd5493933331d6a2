"""Docs, configs, code comments and test docstrings describe the code as it is: no absolute path of the machine a
run was made on, and no narration of past work by numbered sessions, attempts or runs (git keeps the history).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXCLUDED = {
    "tests/test_present_tense.py",  # its own patterns
}
TEXT_SUFFIXES = {".py", ".md", ".yaml", ".yml", ".toml", ".txt", ".cfg", ".sh", ".csv", ".ini", ""}
# Folders of a machine or a user, not of the repository (/tmp/... in examples and /usr/bin are not a machine's).
MACHINE_PATH = re.compile(r"(?<![\w.~$}/-])/(?:work|home|Users|root|scratch|mnt|gpfs|lustre|data)/[\w.-]+")
ORDINAL = (
    "third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|"
    "seventeenth|eighteenth|nineteenth|twentieth"
)
NARRATION = re.compile(
    rf"\bsessions? \d+|\b(?:attempt|try) #?\d+|\brun #\d+|\b(?:{ORDINAL})\b(?: [\w-]+)? (?:run|attempt|session)s?\b|"
    r"\b(?:since|before|until|earlier in|after) issue \d+|"
    # rounds of measurement, code and goals of the past: the present states the current figure, git keeps the rest
    r"\bearlier (?:code|rounds?|sessions?|measurements?)\b|\bthe (?:session|round) before\b|\btried and left\b|"
    r"\b(?:the|an) issue set\b|\bbefore, with \d+ rounds\b",
    re.IGNORECASE,
)


# Folders of a copy of the tree that git would not track (CI's newcomer stage tests a copy without .git).
NOT_TRACKED = {"__pycache__", "multirun", "outputs", "rlzoo_conf", "build", "dist"}


def tracked_text_files() -> list[Path]:
    """The text files git tracks; in a copy of the tree without ``.git``, every file outside hidden and build dirs."""
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False)
    if listed.returncode == 0:
        names = listed.stdout.split()
    else:
        names = [
            str(path.relative_to(ROOT))
            for path in ROOT.rglob("*")
            if not any(part.startswith(".") or part in NOT_TRACKED or part.endswith(".egg-info")
                       for part in path.relative_to(ROOT).parts)
        ]  # fmt: skip
    return [ROOT / n for n in names if n not in EXCLUDED and Path(n).suffix in TEXT_SUFFIXES and (ROOT / n).is_file()]


def findings(pattern: re.Pattern[str]) -> list[str]:
    found = []
    for path in tracked_text_files():
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            match = pattern.search(line)
            if match:
                found.append(f"{path.relative_to(ROOT)}:{number}: {match.group(0)}")
    return found


def test_no_machine_paths() -> None:
    assert findings(MACHINE_PATH) == []


def test_no_narration_of_past_work() -> None:
    assert findings(NARRATION) == []


def test_the_patterns_find_what_they_look_for() -> None:
    assert MACHINE_PATH.search("see /work/runs/x") and not MACHINE_PATH.search("pipeline.dir=/tmp/demo")
    assert NARRATION.search("the fourteenth run took") and NARRATION.search("since session 23")
    assert not NARRATION.search("the first run's objects") and not NARRATION.search("a run of 100 steps")
    assert NARRATION.search("Earlier code took 2 s") and NARRATION.search("## Tried and left")
    assert NARRATION.search("the goals the issue set") and NARRATION.search("The session before, with 3 rounds")
    assert not NARRATION.search("an earlier checkpoint") and not NARRATION.search("the issue's settings")
