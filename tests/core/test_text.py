"""Inert text: what a candidate writes is shown, never obeyed, in a terminal, Markdown or HTML."""

from __future__ import annotations

from html.parser import HTMLParser

from markdown_it import MarkdownIt
from rich.console import Console

from kernelproof.console import line, make_console
from kernelproof.text import LINE_CHARS, html, markdown_code, markdown_text, terminal, visible

OSC_TITLE = "\x1b]0;pwned\x07"
CURSOR_UP_ERASE = "\x1b[1A\x1b[2K\r"


def _md_to_html(source: str) -> str:
    return MarkdownIt("commonmark").enable("table").render(source)


def test_control_characters_become_visible_escapes():
    assert visible(OSC_TITLE + CURSOR_UP_ERASE) == "\\x1b]0;pwned\\x07\\x1b[1A\\x1b[2K\\r"
    assert visible("a\tb\x7fc\x00") == "a\\tb\\x7fc\\x00"


def test_c1_controls_bidi_overrides_and_line_separators_are_escaped():
    assert visible("\x9b2J\x85") == "\\x9b2J\\x85"
    assert visible("\u202egnp.exe\u2066x\u2069") == "\\u202egnp.exe\\u2066x\\u2069"
    assert visible("a\u2028b\u200bc\ufeff") == "a\\u2028b\\u200bc\\ufeff"
    assert visible("lone \udcff surrogate") == "lone \\udcff surrogate"


def test_printable_text_and_non_ascii_letters_are_left_alone():
    text = "naïve 東京 λ=1.5e-3 C:\\path [bold] :smile:"
    assert visible(text) == text


def test_newlines_stay_only_where_several_lines_are_expected():
    assert terminal("a\nb") == "a\\nb"
    assert terminal("a\nb\r\nc", multiline=True) == "a\nb\\r\nc"


def test_terminal_lines_are_capped_and_say_how_much_was_cut():
    out = terminal("x" * (LINE_CHARS + 50))
    assert out == "x" * LINE_CHARS + " ... [50 more characters]"
    many = terminal("\n".join(str(i) for i in range(20)), multiline=True, max_lines=3)
    assert many.splitlines() == ["0", "1", "2", "... [17 more lines]"]


def test_rich_shows_markup_and_emoji_codes_as_written():
    console = Console(record=True, width=200, force_terminal=True)
    console.print(line("[bold red]x[/] :smile: ", ("[link=https://e.x]y[/link]", "green")))
    assert console.export_text() == "[bold red]x[/] :smile: [link=https://e.x]y[/link]\n"
    assert "\x1b]8;" not in console.export_text(styles=True)  # no hyperlink was made


def test_kernelproofs_console_turns_no_emoji_code_into_an_emoji():
    console = make_console()
    with console.capture() as captured:
        console.print("solution :smile:.py")
    assert captured.get() == "solution :smile:.py\n"


def test_code_span_fences_past_every_backtick_run():
    for text in ("a`b", "``x``", "`", "a ``` b", " lead", "trail "):
        span = markdown_code(text, table=False)
        page = _md_to_html(span)
        assert page == f"<p><code>{html(text)}</code></p>\n", (text, span, page)


def test_nothing_in_a_code_span_renders():
    text = "![i](http://e/i.png) [l](http://e) <http://e> <b>b</b> *em* _u_ &amp; \x1b]8;;http://e\x1b\\"
    page = _md_to_html(markdown_code(text, table=False))
    assert page.count("<code>") == 1 and "<img" not in page and "<a " not in page and "<b>" not in page
    assert "\x1b" not in page


def test_a_pipe_or_newline_in_a_code_span_cannot_break_a_table_row():
    cell = markdown_code("a | b\n| c |")
    page = _md_to_html(f"| x | y |\n|---|---|\n| {cell} | z |\n")
    assert "<td><code>a | b\\n| c |</code></td>\n<td>z</td>" in page


def test_escaped_prose_renders_no_markup():
    text = "# t *e* _u_ ![i](http://e/i.png) [l](http://e) <http://e> <b>x</b> &amp; `c` | 1."
    page = _md_to_html(markdown_text(text))
    assert page == f"<p>{html(text).replace('&#x27;', chr(39))}</p>\n"


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)


def test_html_escape_leaves_no_element_and_no_control_character():
    parser = _Tags()
    parser.feed(html("<img src=x onerror=alert(1)><a href='http://e'>l</a>\u202e\x1b[2K", multiline=True))
    assert parser.tags == []
    assert html("a\nb\x1b", multiline=True) == "a\nb\\x1b"
