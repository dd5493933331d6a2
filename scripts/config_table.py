"""The option tables of docs/config.md, generated from ``conf/``: one table per config group of ``conf/train.yaml``'s
defaults, one row per option file (its name, the first sentence of its header comment, its ``_target_`` where the
group's options name one). The tables are rewritten between the doc's markers; the rest of the doc is kept.

    python scripts/config_table.py           # rewrite docs/config.md's tables from conf/
    python scripts/config_table.py --check   # exit 1, saying so, when docs/config.md differs from conf/
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
DOC = ROOT / "docs" / "config.md"
BEGIN, END = "<!-- scripts/config_table.py: begin -->", "<!-- scripts/config_table.py: end -->"
# A sentence ends at a full stop before a space or the end, except after these abbreviations.
SENTENCE_END = re.compile(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)(?<!\betc)\.(?=\s|$)")


def groups(conf: Path = CONF) -> list[str]:
    """The config groups of ``conf/train.yaml``'s defaults list, in its order (``optional`` dropped)."""
    defaults = OmegaConf.to_container(OmegaConf.load(conf / "train.yaml").defaults)
    assert isinstance(defaults, list)
    names = [str(next(iter(entry))) for entry in defaults if isinstance(entry, dict)]
    return [name.removeprefix("optional ") for name in names]


def summary(path: Path) -> str:
    """The first sentence of an option file's header comment (``# @package`` lines skipped; an indented comment line,
    such as an example command, ends the header)."""
    words = []
    for line in path.read_text().splitlines():
        if not line.startswith("#") or line.startswith("#  "):
            break
        if not line.startswith("# @package"):
            words.append(line.removeprefix("#").strip())
    text = " ".join(words)
    end = SENTENCE_END.search(text)
    sentence = (text[: end.start()] if end else text).rstrip(":;, ")
    return sentence.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def target(path: Path) -> str:
    """The option's top-level ``_target_``, or an empty string."""
    values = OmegaConf.load(path)
    return str(values.get("_target_", "")) if isinstance(values, DictConfig) else ""


def group_table(group: str, conf: Path = CONF) -> str:
    """The markdown table of one group: option, what it is (and ``_target_`` where the options name one)."""
    options = sorted((conf / group).glob("*.yaml"), key=lambda p: p.stem.lower())
    targets = [target(path) for path in options]
    with_target = any(targets)
    head = "| option | what it is |" + (" `_target_` |" if with_target else "")
    rows = [f"### `{group}`", "", head, "|---|---|" + ("---|" if with_target else "")]
    for path, name in zip(options, targets, strict=True):
        row = f"| `{path.stem}` | {summary(path)} |"
        if with_target:
            row += f" `{name}` |" if name else "  |"
        rows.append(row)
    return "\n".join(rows)


def tables(conf: Path = CONF) -> str:
    """Every group's table, in the defaults' order."""
    return "\n\n".join(group_table(group, conf) for group in groups(conf))


def with_tables(text: str, conf: Path = CONF) -> str:
    """``text`` with what lies between its markers replaced by the generated tables."""
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        raise ValueError(f"the doc must hold {BEGIN} and {END} once each")
    before, rest = text.split(BEGIN)
    after = rest.split(END)[1]
    return f"{before}{BEGIN}\n{tables(conf)}\n{END}{after}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 when the doc differs")
    parser.add_argument("--doc", type=Path, default=DOC, help="the doc holding the markers (docs/config.md)")
    args = parser.parse_args(argv)
    text = args.doc.read_text()
    generated = with_tables(text)
    if args.check:
        if generated != text:
            print(f"{args.doc} differs from conf/; rewrite it: python scripts/config_table.py", file=sys.stderr)
            return 1
        return 0
    args.doc.write_text(generated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
