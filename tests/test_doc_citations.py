"""Every docs section the code cites exists: a comment, docstring or message that
sends the reader to ``docs/X.md, "Section"``, ``docs/X.md section N``, ``DESIGN.md section N``
or ``README, "Section"`` names a heading that file has, and ``row "Name"`` after it a row of a
table there. Code that cites a section that was renamed or never written sends the reader
nowhere; this test names each such citation.

What counts as the section a name cites: a Markdown heading (outside code blocks) whose text,
without its number (``## 3. MySQL`` is section 3, "MySQL") and backticks, is the name, or
begins with it followed by ``:``, ``,`` or `` (`` (``"Hot keys"`` for "Hot keys: MySQL only for
keys it may hold"); or a bold run-in heading that opens a paragraph (``**Two drivers.**``).
Pure unit tests: files are read, nothing is run.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# A citation spans comment lines: a line break, its indentation and a "#" are one space.
_JOIN = re.compile(r"\n[ \t]*(?:(?:#|//|\*)(?![!*])[ \t]*)?")
_CITE = re.compile(r'(?:docs/)?(?P<doc>[A-Z]+)(?:\.md)?'
                   r'(?P<parts>(?:(?:,|\s)\s*(?:section\s+[0-9]+[a-z]?|row\s+\\?"[^"\\\n]{1,80}\\?"'
                   r'|\\?"[^"\\\n]{1,80}\\?"))+)')
_PART = re.compile(r'section\s+(?P<number>[0-9]+[a-z]?)|row\s+\\?"(?P<row>[^"\\]+)\\?"'
                   r'|\\?"(?P<name>[^"\\]+)\\?"')


def _doc_path(doc: str, root: Path = ROOT) -> Path:
    return root / "README.md" if doc == "README" else root / "docs" / f"{doc}.md"


@cache
def places(path: Path) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The headings (number-less text), section numbers and table rows' first cells of the
    Markdown file *path*, code blocks skipped."""
    headings, numbers, rows = [], [], []
    fenced = False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
            continue
        if fenced:
            continue
        heading = re.match(r"#+\s+(?:(?P<n>[0-9]+[a-z]?)\.\s+)?(?P<text>.*)", line)
        bold = re.match(r"\*\*(?P<text>[^*]+?)\.?\*\*", line)
        if heading:
            headings.append(heading.group("text").replace("`", "").strip())
            if heading.group("n"):
                numbers.append(heading.group("n"))
        elif bold:
            headings.append(bold.group("text").replace("`", "").strip())
        elif line.startswith("|"):
            rows.append(line.strip("|").split("|")[0].replace("`", "").strip())
    return tuple(headings), tuple(numbers), tuple(rows)


def _names_a_heading(name: str, headings: tuple[str, ...]) -> bool:
    name = name.replace("`", "").strip()
    return any(h == name or (h.startswith(name) and h[len(name):][:2] in (": ", ", ", " ("))
               for h in headings)


def citations(text: str) -> list[tuple[str, str, str]]:
    """(document, kind, name) of every citation in *text*: kind ``section`` (a number),
    ``heading`` or ``row``."""
    found = []
    for match in _CITE.finditer(_JOIN.sub(" ", text)):
        if match.group("doc") not in _known_docs():
            continue
        for part in _PART.finditer(match.group("parts")):
            kind = "section" if part.group("number") else "row" if part.group("row") \
                else "heading"
            found.append((match.group("doc"), kind, part.group("number") or part.group("row")
                          or part.group("name")))
    return found


@cache
def _known_docs() -> frozenset[str]:
    return frozenset({p.stem for p in (ROOT / "docs").glob("*.md")} | {"README"})


def broken(text: str, root: Path = ROOT) -> list[str]:
    """The citations in *text* that name no section, heading or row of their document."""
    wrong = []
    for doc, kind, name in citations(text):
        path = _doc_path(doc, root)
        if not path.exists():
            wrong.append(f"{doc}: no such document")
            continue
        headings, numbers, rows = places(path)
        if (kind == "section" and name not in numbers) \
                or (kind == "heading" and not _names_a_heading(name, headings)) \
                or (kind == "row" and name.replace("`", "") not in rows):
            wrong.append(f"{doc} {kind} {name!r}")
    return wrong


def _code_files() -> list[Path]:
    return sorted([*(p for d in ("debl", "loaders", "coordinator", "scripts", "tests")
                     for p in (ROOT / d).rglob("*.py")),
                   *(ROOT / "loaders" / "jvm").rglob("*.java"), *(ROOT / "scripts").glob("*.sh")])


def test_every_docs_section_the_code_cites_exists():
    wrong = {str(p.relative_to(ROOT)): broken(p.read_text()) for p in _code_files()
             if p.name != Path(__file__).name}  # this file's citations are planted
    assert {path: w for path, w in wrong.items() if w} == {}


def test_the_code_cites_many_sections():
    """The citations are found at all (the pattern matches how the code writes them)."""
    found = [c for p in _code_files() if p.name != Path(__file__).name
             for c in citations(p.read_text())]
    assert len(found) > 150
    assert {kind for _, kind, _ in found} == {"section", "heading", "row"}


def test_the_check_finds_broken_citations_across_comment_lines(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "LOADING.md").write_text(
        "# Loading\n\n## 3. Days\n\n### Hot keys: MySQL only\n\n**Two drivers.** Reads...\n\n"
        "| what | how |\n|---|---|\n| `Resume` | ... |\n\n```\n## Not a heading\n```\n")
    (tmp_path / "README.md").write_text("## Configuration\n")
    text = ('# the rule (docs/LOADING.md, "Days", "Hot keys"; docs/LOADING.md section 3;\n'
            '# LOADING.md section 4, "Two drivers", "Hot\n'
            '# keys", "Not a heading", row "Resume", row "Days") and README, "Configuration"\n'
            'raise E("see docs/LOADING.md, \\"Hot\\" and README, \\"Nothing\\"")\n')
    assert broken(text, tmp_path) == [
        "LOADING section '4'", "LOADING heading 'Not a heading'", "LOADING row 'Days'",
        "LOADING heading 'Hot'", "README heading 'Nothing'"]
