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


def test_the_readmes_python_names_nothing_it_does_not_define_or_import():
    import ast
    import builtins

    readme = (REPO / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", readme, flags=re.M | re.S)
    assert blocks
    for block in blocks:
        tree = ast.parse(block)
        defined = set(dir(builtins))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                defined |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        assert used <= defined, sorted(used - defined)  # `pairs` was used and never made


def documented_commands() -> list[tuple[str, list[str]]]:
    """Each ``kernelproof VERB ...`` written in README.md and docs/ (fenced blocks, their lines
    joined at a trailing backslash, and inline spans), as (document, words after the program)."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        fenced = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.M | re.S)
        inline = re.findall(r"`(kernelproof [^`\n]+)`", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))
        lines = [ln for block in fenced for ln in block.replace("\\\n", " ").splitlines()] + inline
        for ln in lines:
            for found in re.finditer(r"(?:^|&&|\||;)\s*kernelproof\s+([a-z]\S*.*)", ln):
                out.append((doc.name, found.group(1).split(" #")[0].split()))
    return out


def test_every_documented_command_names_a_verb_and_options_it_takes():
    import typer

    from kernelproof import cli

    cli._register_optional()
    root = typer.main.get_command(cli.app)
    wrong = []
    for doc, words in documented_commands():
        verb = root.commands.get(words[0])
        if verb is None:
            wrong.append(f"{doc}: no verb {words[0]!r}: {' '.join(words)}")
            continue
        if words[1:] and words[1] in getattr(verb, "commands", {}):
            verb = verb.commands[words[1]]
        takes = {"--help", *(o for p in verb.params for o in (*p.opts, *p.secondary_opts))}
        for word in words:
            flag = word.split("=")[0].rstrip(",.;)]")
            if flag.startswith("--") and flag not in takes:
                wrong.append(f"{doc}: {words[0]} takes no {flag}: {' '.join(words)}")
    assert len(documented_commands()) > 20  # the docs were read
    assert not wrong, "\n".join(wrong)
