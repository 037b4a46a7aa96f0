"""Comments, docstrings and docs name only paths that exist: a renamed module leaves no stale pointer behind.

A path here is a word like `clusters/render/namespace.py` or `gpucloud/kube/` whose first part is a top-level
directory of the repository, or one that was and is gone (`RETIRED`: any path into one is stale). Test code
and migrations are history and examples, so they are not read.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Directories that are state or tooling, not the project's own: a path into them says nothing of the code.
NOT_OURS = {".git", ".venv", "var", "node_modules", "__pycache__", "build", "dist"}
# Top-level packages that were split and moved away (issue 25): their names must not come back as paths.
RETIRED = {"scheduling", "workers"}
TOP = sorted(
    RETIRED
    | {
        p.name
        for p in ROOT.iterdir()
        if p.is_dir()
        and p.name not in NOT_OURS
        and not p.name.endswith(".egg-info")
        and not p.name.startswith(".")
    }
)
# Not preceded by a path or URL character (so `/api/v1/tenants/…` is a URL, not the directory `tenants/`).
PATH = re.compile(r"(?<![\w./:@-])(?:" + "|".join(map(re.escape, TOP)) + r")/[\w./-]*")
DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]


def product_modules() -> Iterator[Path]:
    for top in TOP:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = set(path.relative_to(ROOT).parts)
            if not parts & {"tests", "migrations", "node_modules"} and top != "tests":
                yield path


def prose_of(path: Path) -> Iterator[tuple[int, str]]:
    """(line, text) of every comment and docstring of a module."""
    source = path.read_text()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            docstring = ast.get_docstring(node, clean=False)
            if docstring is not None:
                yield node.body[0].lineno, docstring


def named_paths(text: str) -> Iterator[str]:
    for match in PATH.finditer(text):
        path = match.group(0).rstrip(".-")
        if not re.search(r"[*{<…]", text[match.end() : match.end() + 1]):
            yield path


def missing(where: str, text: str) -> list[str]:
    return [f"{where}: {path}" for path in named_paths(text) if not (ROOT / path).exists()]


def test_the_paths_comments_and_docstrings_name_exist() -> None:
    stale = [
        problem
        for module in product_modules()
        for line, text in prose_of(module)
        for problem in missing(f"{module.relative_to(ROOT)}:{line}", text)
    ]
    assert stale == [], "comments or docstrings name paths that do not exist:\n" + "\n".join(stale)


def test_the_paths_the_docs_name_exist() -> None:
    stale = [
        problem
        for doc in DOCS
        for number, line in enumerate(doc.read_text().splitlines(), 1)
        for problem in missing(f"{doc.relative_to(ROOT)}:{number}", line)
    ]
    assert stale == [], "the docs name paths that do not exist:\n" + "\n".join(stale)


def test_it_finds_a_path_that_does_not_exist() -> None:
    assert missing("here", "see `clusters/no_such_module.py`, not /api/v1/tenants/x/") == [
        "here: clusters/no_such_module.py"
    ]
