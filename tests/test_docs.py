"""The docs match the tool: every verb is in the README's table, and every repository path the
README and docs/ write in backticks exists."""

from __future__ import annotations

import re
from pathlib import Path

from cli_support import REPO, run_here

PREFIXES = ("suite/", "examples/", "docs/", "benchmarks/", "scripts/", "tests/", "kernelproof/")
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def verbs_in_help(capsys) -> set[str]:
    ran = run_here(capsys, "--help")
    assert ran.code == 0
    commands = ran.out[ran.out.index("Commands") :]
    return set(re.findall(r"^  (\w+)  ", commands, re.M))


def test_every_verb_of_the_help_is_in_the_readme_table(capsys):
    readme = (REPO / "README.md").read_text()
    in_table = set(re.findall(r"^\| `kernelproof (\w+)", readme, re.M))
    verbs = verbs_in_help(capsys)
    assert {"eval", "bench", "ceilings", "keys", "cache"} <= verbs  # the help was read
    assert verbs <= in_table, sorted(verbs - in_table)


def code_spans(text: str) -> list[str]:
    """Inline code spans and whole fenced blocks: both are written in backticks."""
    fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
    inline = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.findall(r"`([^`\n]+)`", inline) + fenced


def repository_paths(text: str) -> list[str]:
    out = []
    for span in code_spans(text):
        for token in re.split(r"[\s=(),\[\]{}]+", span):
            token = token.strip(";'\".")
            if token.startswith(PREFIXES):
                out.append(re.sub(r"(::\w+|:\d+(-\d+)?)$", "", token))  # a test's name, a line number
    return out


def test_every_repository_path_written_in_backticks_exists():
    missing = []
    for doc in DOCS:
        for path in repository_paths(doc.read_text()):
            if "*" in path:
                found = list(REPO.glob(path))
            else:
                found = [REPO / path] if (REPO / path).exists() else []
            if not found:
                missing.append(f"{doc.relative_to(REPO)}: {path}")
    assert not missing, "\n".join(missing)


def test_the_path_check_reads_spans_and_fenced_blocks():
    text = 'Run `suite/level9/none.py` or `kernelproof eval suite/a.py:3 x`.\n```python\nf("tests/b.py", 1)\n```\n'
    assert repository_paths(text) == ["suite/level9/none.py", "suite/a.py", "tests/b.py"]
    assert not Path(REPO / "suite" / "level1" / "relu.py").exists()  # the name docs/ray.md once gave
