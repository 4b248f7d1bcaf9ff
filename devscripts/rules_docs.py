"""Each gotcha's rules live in one place, its judge's docstring; docs/checks/gNN.md shows them.

    python devscripts/rules_docs.py            # say which pages differ from their judge (exit 1 if any)
    python devscripts/rules_docs.py --write    # write each judge's rules into its page

A judge module's docstring holds a line ``Rules:`` followed by the rules, in Markdown. The page
docs/checks/gNN.md holds them between the two marker lines below; --write replaces what is
between them (tests/test_rules_docs.py fails when a page and its judge differ). Runs here, no GPU.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUDGES = ROOT / "spark_gotchas" / "knowledge" / "judges"
PAGES = ROOT / "docs" / "checks"
BEGIN = "<!-- rules: written from the judge's docstring by devscripts/rules_docs.py; edit them there -->"
END = "<!-- end of rules -->"


def judge_rules(gotcha: int) -> str:
    """The Markdown after the ``Rules:`` line of the gotcha's judge modules' docstrings, in name
    order (G1 has two: the ABI and whether the GPU is visible here)."""
    parts = []
    for path in sorted(JUDGES.glob(f"g{gotcha:02d}_*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
        _head, sep, rules = doc.partition("\nRules:\n")
        if not sep:
            raise SystemExit(f"{path.relative_to(ROOT)}: the docstring has no 'Rules:' line")
        parts.append(rules.strip("\n"))
    return "\n\n".join(parts) + "\n"


def page_rules(gotcha: int) -> tuple[Path, str | None]:
    """(the page, what stands between its markers; None without them)."""
    page = PAGES / f"g{gotcha:02d}.md"
    text = page.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        return page, None
    return page, text.split(BEGIN, 1)[1].split(END, 1)[0].strip("\n") + "\n"


def write(gotcha: int) -> bool:
    """Put the judge's rules into the page; True when it changed."""
    rules = judge_rules(gotcha)
    page, now = page_rules(gotcha)
    if now == rules:
        return False
    text = page.read_text(encoding="utf-8")
    if now is None:
        raise SystemExit(f"{page.relative_to(ROOT)}: no {BEGIN!r} … {END!r} block to write into")
    before, rest = text.split(BEGIN, 1)
    after = rest.split(END, 1)[1]
    page.write_text(f"{before}{BEGIN}\n\n{rules}\n{END}{after}", encoding="utf-8")
    return True


def main(argv: list[str]) -> int:
    differ = []
    for gotcha in range(1, 11):
        if "--write" in argv:
            if write(gotcha):
                print(f"docs/checks/g{gotcha:02d}.md: rules written from its judge")
        elif page_rules(gotcha)[1] != judge_rules(gotcha):
            differ.append(f"docs/checks/g{gotcha:02d}.md")
    for page in differ:
        print(f"{page}: its rules differ from its judge's docstring (python devscripts/rules_docs.py --write)")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
