"""The `lines` column of the Layout table (README.md, and its copy in CONTRIBUTING.md), from the tree.

Product code is every ``.py`` file outside tests/, scripts/, bench/ and hidden or build folders.
Each table row names its files and folders in the `where` column: a file named in a row belongs
to that row, and a folder holds every product file below it that no row names (the deepest
folder wins). A row's count is what ``cat <its files> | wc -l`` prints; README's "Product code"
sentence carries the total beside the budget. tests/test_user_docs.py fails when a count, the
total or a file's row is out of date.

    python bench/layout_lines.py           # print the rows and the total the tree gives
    python bench/layout_lines.py --write   # rewrite them in README.md and CONTRIBUTING.md
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "CONTRIBUTING.md")
HEADER = "| family | where | lines | what it owns |"
NOT_PRODUCT = {"tests", "scripts", "bench", "build", "dist"}
TOTAL = re.compile(r"(Product code is \*\*)([\d,]+)(\*\* lines)")
BUDGET = re.compile(r"budget of \*\*([\d,]+)\*\* lines")


def product_files(root: Path = ROOT) -> list[Path]:
    found = []
    for path in sorted(root.rglob("*.py")):
        top = path.relative_to(root).parts[0]
        if top not in NOT_PRODUCT and not top.startswith(".") and "egg-info" not in top:
            found.append(path)
    return found


def line_count(paths: list[Path]) -> int:
    return sum(p.read_bytes().count(b"\n") for p in paths)


def table(text: str) -> list[tuple[int, list[str]]]:
    """(line index, cells) of each body row of the Layout table in ``text``."""
    lines = text.splitlines()
    start = lines.index(HEADER) + 2
    rows = []
    for i in range(start, len(lines)):
        if not lines[i].startswith("|"):
            break
        rows.append((i, [c.strip() for c in lines[i].strip("|").split("|")]))
    return rows


def assign(text: str, root: Path = ROOT) -> tuple[dict[str, list[Path]], list[Path]]:
    """Each row's product files, and the product files no row claims."""
    named: dict[Path, str] = {}
    folders: dict[Path, str] = {}
    for _, cells in table(text):
        for token in re.findall(r"`([^`*]+)`", cells[1]):
            if token.endswith("/"):
                folders[root / token.rstrip("/")] = cells[0]
            elif token.endswith(".py"):
                named[root / token] = cells[0]
    rows: dict[str, list[Path]] = {cells[0]: [] for _, cells in table(text)}
    unclaimed = []
    for path in product_files(root):
        owners = [d for d in folders if path.is_relative_to(d)]
        family = named.get(path) or (folders[max(owners, key=lambda d: len(d.parts))] if owners else None)
        if family is None:
            unclaimed.append(path)
        else:
            rows[family].append(path)
    return rows, unclaimed


def stale(text: str, root: Path = ROOT) -> list[str]:
    """Files and folders the table names that the tree does not have."""
    return [token for _, cells in table(text) for token in re.findall(r"`([^`*]+)`", cells[1])
            if token.endswith(("/", ".py")) and not (root / token).exists()]


def counted(text: str, root: Path = ROOT) -> str:
    """``text`` with the table's `lines` cells (and the total, where it is given) taken from the tree."""
    rows, _ = assign(text, root)
    lines = text.splitlines(keepends=True)
    for i, cells in table(text):
        cells[2] = f"{line_count(rows[cells[0]]):,}"
        lines[i] = "| " + " | ".join(cells) + " |\n"
    return TOTAL.sub(lambda m: f"{m[1]}{line_count(product_files(root)):,}{m[3]}", "".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the counts in README.md and CONTRIBUTING.md")
    args = parser.parse_args()
    for name in DOCS:
        path = ROOT / name
        text = path.read_text(encoding="utf-8")
        new = counted(text)
        unclaimed = [str(p.relative_to(ROOT)) for p in assign(text)[1]]
        if unclaimed or stale(text):
            print(f"{name}: no row names {unclaimed}; named but absent: {stale(text)}")
        if args.write and new != text:
            path.write_text(new, encoding="utf-8")
            print(f"{name}: rewritten")
    for _, cells in table(counted((ROOT / DOCS[0]).read_text(encoding="utf-8"))):
        print(f"{cells[0]:<14} {cells[2]:>7}")
    print(f"{'total':<14} {line_count(product_files()):>7,}")


if __name__ == "__main__":
    main()
