"""Text a candidate can influence, made inert for the medium that shows it.

A candidate chooses much of what kernelproof prints: its exception messages and tracebacks reach
reason messages and details, its compiler output reaches build logs, its file and function names
reach paths, flags, task and solution names; verdict files, stores and certificates read back
later carry the same strings. Shown raw, that text is instructions to the medium: an escape
sequence retitles the terminal, moves the cursor up and prints a green PASS over the real result,
an OSC 8 sequence or a Markdown ``![](...)`` fetches and links what the candidate wants, a bidi
override reverses what a reader sees. The verdict must be the only thing that speaks (I1, I9).

Every printer and report passes candidate-influenced strings through one function here, per
medium:

- :func:`terminal` (``eval``, ``bench``, ``results``, ``audit``, ``compare``, ``optimize``,
  ``certify``/``verify``): every character that is not plain printable text becomes a visible
  escape such as ``\\x1b`` or ``\\u202e`` (see :func:`visible`), so an escape sequence is left as
  harmless printable characters; lines are capped at :data:`LINE_CHARS`.
- :func:`markdown_code` (the Markdown reports): a code span fenced by more backticks than the text
  holds, so nothing in it renders as a link, image, emphasis, autolink or HTML; safe in a table
  cell. :func:`markdown_text` escapes prose that is ours but may hold anything (a title).
- :func:`html` (the HTML report): HTML-escaped, after the same visible escapes.
- :func:`plot_label` (legends of the report's figures): visible escapes, capped, and every ``$``
  escaped so matplotlib reads no mathtext (a malformed formula would end the report).
- JSON output stays raw: JSON is data, its strings are quoted by the encoder, and the full text
  lives there (terminal and Markdown lines are capped; the JSON is not).

Rich is given plain :class:`rich.text.Text` built from :func:`terminal`'s output, never markup, so
``[bold]`` or ``:smile:`` in a message stays as written (kernelproof/console.py).
"""

from __future__ import annotations

import html as _html
import re
import unicodedata

PLOT_LABEL_CHARS = 60  # a legend entry longer than this crowds the figure out
# The longest line shown in a terminal or a Markdown cell: a reason message with a few bad indices
# fits; a 10 kB one-line compiler error does not, and its whole text stays in the JSON.
LINE_CHARS = 300
# Unicode categories shown as escapes: Cc (C0 controls, DEL, C1 controls), Cf (format characters:
# bidi embeddings, overrides and isolates, zero-width characters, the BOM, tag characters),
# Cs (lone surrogates, which cannot even be encoded), Zl and Zp (line and paragraph separators,
# which Python's splitlines and some viewers break lines at).
_ESCAPED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}
_NOT_PLAIN_ASCII = re.compile(r"[^\x20-\x7e]")
_BACKTICKS = re.compile(r"`+")
# ASCII punctuation that CommonMark lets a backslash escape (spec section 2.4): all of it.
_MD_PUNCTUATION = re.compile(r"""([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])""")


def visible(text: object, *, newlines: bool = False) -> str:
    """``text`` with every control or format character replaced by a visible escape.

    ``\\x1b`` for ESC, ``\\r``, ``\\t``, ``\\x9b`` for the 8-bit CSI, ``\\u202e`` for a
    right-to-left override. A newline stays a newline only with ``newlines`` (a printer that
    expects several lines: a traceback, a build log); otherwise it is shown as ``\\n``.
    Printable characters, backslashes included, are left alone.
    """

    def escape(match: re.Match[str]) -> str:
        ch = match.group()
        if ch == "\n" and newlines:
            return ch
        if ch in _SHORT:
            return _SHORT[ch]
        if unicodedata.category(ch) not in _ESCAPED_CATEGORIES:
            return ch
        code = ord(ch)
        if code < 0x100:
            return f"\\x{code:02x}"
        return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

    return _NOT_PLAIN_ASCII.sub(escape, str(text))


def cap(line: str, limit: int = LINE_CHARS) -> str:
    """``line`` cut to ``limit`` characters, saying how many were left out."""
    if len(line) <= limit:
        return line
    return f"{line[:limit]} ... [{len(line) - limit} more characters]"


def terminal(
    text: object, *, multiline: bool = False, max_lines: int | None = None, limit: int = LINE_CHARS
) -> str:
    """Text safe to print to a terminal: visible escapes, every line capped at ``limit``.

    One line unless ``multiline``; then at most ``max_lines`` lines (all when None), with a last
    line saying how many more there were.
    """
    lines = visible(text, newlines=multiline).split("\n")
    shown = lines if max_lines is None else lines[:max_lines]
    out = [cap(line, limit) for line in shown]
    if len(lines) > len(shown):
        out.append(f"... [{len(lines) - len(shown)} more lines]")
    return "\n".join(out)


def markdown_code(text: object, *, table: bool = True, limit: int = LINE_CHARS) -> str:
    """``text`` as one Markdown code span: shown literally, nothing in it renders.

    CommonMark ends a code span at the first backtick run as long as its opening one, so the
    fence is one backtick longer than the longest run inside; a space pads text that starts or
    ends with a backtick or a space (the renderer strips one from each side). Newlines and
    control characters become visible escapes (a newline would end a table row). In a table
    cell (``table``) every pipe is written ``\\|``: GitHub and markdown-it split cells at a pipe
    even inside a code span, and unescape ``\\|`` before reading the span.
    """
    body = cap(visible(text), limit)
    if not body:
        return ""
    longest = max((len(run) for run in _BACKTICKS.findall(body)), default=0)
    fence = "`" * (longest + 1)
    if body[0] in "` " or body[-1] in "` ":
        body = f" {body} "
    if table:
        body = body.replace("|", "\\|")
    return f"{fence}{body}{fence}"


def markdown_text(text: object, *, limit: int = LINE_CHARS) -> str:
    """``text`` as Markdown prose on one line, every ASCII punctuation mark backslash-escaped.

    With ``*_[]()!<>&`` and the rest escaped, no emphasis, link, image, autolink, entity or
    HTML can start; pipes are escaped too, so it is safe in a table cell. For text we write
    that may still hold anything (a report title); candidate text goes in :func:`markdown_code`.
    """
    return _MD_PUNCTUATION.sub(r"\\\1", cap(visible(text), limit))


def html(text: object, *, multiline: bool = False) -> str:
    """``text`` escaped for HTML element content and quoted attributes, with visible escapes.

    The visible escapes keep a bidi override from reversing what the page shows and keep
    control characters out of the document.
    """
    return _html.escape(visible(text, newlines=multiline), quote=True)


def plot_label(text: object, *, limit: int = PLOT_LABEL_CHARS) -> str:
    """``text`` as a matplotlib label: visible escapes, capped, ``$`` shown as itself."""
    return cap(visible(text), limit).replace("$", "\\$")
