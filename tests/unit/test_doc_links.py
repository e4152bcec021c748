"""Every link between the repository's Markdown pages points at a file that exists and, where
it names a section (``page.md#section``), at a heading of that page, as GitHub makes anchors."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# [text](target): targets without a scheme (no http:, mailto:), outside code spans.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`]*`")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation other than - and _ dropped,
    spaces to hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(0).strip("`"), heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text())
    found: set[str] = set()
    for line in text.splitlines():
        if line.startswith("#"):
            base = anchor(line.lstrip("#"))
            name, n = base, 0
            while name in found:  # repeated headings get -1, -2, ...
                n += 1
                name = f"{base}-{n}"
            found.add(name)
    return found


def links_of(page: Path) -> list[str]:
    text = CODE_SPAN.sub("", FENCE.sub("", page.read_text()))
    return [t for t in LINK.findall(text) if not re.match(r"^[a-z]+:", t)]


def test_every_link_between_pages_resolves() -> None:
    broken = []
    for page in PAGES:
        for target in links_of(page):
            path, _, section = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists():
                broken.append(f"{page.relative_to(REPO)}: {target} (no such file)")
            elif section and linked.suffix == ".md" and section not in anchors_of(linked):
                broken.append(f"{page.relative_to(REPO)}: {target} (no such section)")
    assert broken == []


def test_anchor_follows_github() -> None:
    assert anchor(" SSH access (opt-in per server)") == "ssh-access-opt-in-per-server"
    assert anchor("Live keys through the guest agent (issue 17)") == (
        "live-keys-through-the-guest-agent-issue-17"
    )
    assert anchor("`make test`: what it runs") == "make-test-what-it-runs"
