from __future__ import annotations

from agent_fakes import answer, solution

from kernelproof.agent.extract import extract_ideas, extract_solution


def test_takes_the_fenced_python_file_that_defines_model_new():
    got = extract_solution(answer("SPEED: 2.0"))
    assert got.rejection is None
    assert got.source == solution("SPEED: 2.0")


def test_takes_the_last_complete_file_when_the_answer_shows_a_draft_first():
    text = f"Draft:\n```python\n{solution('SPEED: 1.0', 'a')}```\nFinal:\n```python\n{solution('SPEED: 3.0', 'b')}```"
    got = extract_solution(text)
    assert "SPEED: 3.0" in got.source


def test_skips_a_final_block_that_does_not_parse_for_an_earlier_one_that_does():
    text = f"```python\n{solution('SPEED: 1.5')}```\n```python\nclass ModelNew(:\n```"
    got = extract_solution(text)
    assert got.rejection is None and "SPEED: 1.5" in got.source


def test_an_answer_of_one_block_carries_no_note():
    assert extract_solution(answer("SPEED: 2.0")).note == ""


def test_the_note_names_the_block_taken_and_why_each_other_block_was_dropped():
    text = (
        "A helper first:\n```python\ndef helper(x):\n    return x\n```\n"
        "The kernel source:\n```cuda\n__global__ void k() {}\n```\n"
        f"A draft:\n```python\n{solution('SPEED: 1.0', 'draft')}```\n"
        f"Final:\n```python\n{solution('SPEED: 3.0', 'final')}```\n"
        "A broken retry:\n```python\nclass ModelNew(:\n```\n"
    )
    got = extract_solution(text)
    assert "SPEED: 3.0" in got.source
    note = got.note
    assert note.startswith(
        "Your answer held 5 code blocks. The solution file was taken from block 4 (python, lines"
    )
    assert "block 1 (python, lines 2-5): it does not define ModelNew" in note
    assert "block 2 (cuda, lines 7-9): not a Python block" in note
    assert "block 3 (python, lines" in note and "an earlier version" in note
    assert "block 5 (python, lines" in note and "does not parse" in note


def test_accepts_an_unfenced_answer_that_is_a_whole_file():
    got = extract_solution(solution())
    assert got.rejection is None and "class ModelNew" in got.source


def test_ignores_cuda_blocks_and_takes_the_python_file():
    text = "```cuda\n__global__ void k() {}\n```\n" + answer()
    got = extract_solution(text)
    assert got.rejection is None and "__global__" not in got.source


def test_rejects_an_answer_without_code():
    got = extract_solution("I would use shared memory tiling.")
    assert got.rejection.code == "malformed_answer" and "no Python code block" in got.rejection.message


def test_rejects_code_without_model_new():
    got = extract_solution("```python\nimport torch\nclass Model:\n    pass\n```")
    assert "ModelNew" in got.rejection.message


def test_rejects_a_syntax_error_with_its_line_and_an_excerpt():
    text = "```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x)\n        return x\n```"
    got = extract_solution(text)
    assert "line 4" in got.rejection.message
    assert "def forward(self, x)" in got.rejection.detail


def test_rejects_an_answer_cut_off_at_the_token_limit():
    text = "Here:\n```python\nimport torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return"
    got = extract_solution(text, finish_reason="length")
    assert "cut off" in got.rejection.message


def test_rejects_an_empty_answer():
    got = extract_solution("   ")
    assert got.rejection.message == "The answer was empty."


def test_rejects_model_new_that_is_not_at_module_level():
    text = "```python\ndef make():\n    class ModelNew:\n        pass\n    return ModelNew\n```"
    got = extract_solution(text)
    assert "module level" in got.rejection.message


def test_reads_numbered_ideas_with_continuation_lines():
    text = (
        "Some thoughts.\n\n1. Fuse the scale and add into one kernel\n   so x is read once.\n"
        "2) Use a larger BLOCK to cut launch count.\n\n- Vectorise loads with 128-bit accesses.\n"
    )
    assert extract_ideas(text, 5) == [
        "Fuse the scale and add into one kernel so x is read once.",
        "Use a larger BLOCK to cut launch count.",
        "Vectorise loads with 128-bit accesses.",
    ]


def test_ideas_are_limited_and_code_blocks_are_ignored():
    text = "1. first\n```python\n1. not an idea\n```\n2. second\n3. third"
    assert extract_ideas(text, 2) == ["first", "second"]


def test_an_answer_without_a_list_is_one_idea():
    assert extract_ideas("Tile it   in shared memory.", 3) == ["Tile it in shared memory."]
    assert extract_ideas("", 3) == []
