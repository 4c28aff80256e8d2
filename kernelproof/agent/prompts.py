"""Prompts: the task, the device, the contract, the rules, the answer format, and earlier feedback.

Every prompt opens the same way (system text, then the task message), so a provider's prompt
cache serves the long common prefix; what differs (earlier candidates, their feedback, an idea to
implement) comes last. The rules are written from the evaluator's reason codes, so the model is
told in advance exactly what gets an answer rejected and why. Prompts hold no timestamps or run
ids: the same state gives the same prompt and the same hash.

Earlier answers and files come back bounded (``MAX_HISTORY_CHARS`` each, with a marker that says
what was cut and how much): a model that once wrote 2 MB would otherwise have those 2 MB re-sent,
and paid for, in every later prompt. An answer cut for the history keeps its solution file when
the file fits, since that is what the model works on next.
"""

from __future__ import annotations

from dataclasses import dataclass

from kernelproof.agent.call_records import Candidate, Message, Prompt
from kernelproof.agent.context import POLICIES, PRECISIONS, DeviceInfo, TaskInfo, device_text
from kernelproof.agent.feedback import describe_candidate, fence
from kernelproof.agent.ranking import barred, best_speedup
from kernelproof.agent.sizes import SizesTested, sizes_text
from kernelproof.verdict import ReasonCode

# What each reason code rejects, as a rule the model can follow. None: the code is about the
# task or harness, never the answer, and is left out of the rules.
RULES: dict[ReasonCode, str | None] = {
    ReasonCode.COMPILE_ERROR: "The file must import and its kernels must build.",
    ReasonCode.RUNTIME_ERROR: "ModelNew(*get_init_inputs()) and its forward(*get_inputs()) must not raise.",
    ReasonCode.TIMEOUT: "A run that exceeds the time limit is killed and fails.",
    ReasonCode.CRASH: "Illegal memory accesses, segfaults and out-of-memory kill the run: mask every load and "
    "store at the tensor's edges.",
    ReasonCode.MISSING_RESULT: "The process must deliver every result: never exit, fork or close its streams.",
    ReasonCode.WRONG_SHAPE: "The output must have exactly the reference's shape.",
    ReasonCode.WRONG_DTYPE: "The output must have exactly the reference's dtype.",
    ReasonCode.WRONG_TYPE: "The output must be a plain, materialised torch.Tensor on the inputs' device.",
    ReasonCode.NONFINITE: "No NaN or Inf where the reference is finite (watch exp overflow and small divisors).",
    ReasonCode.MISMATCH: "Values must match a float64 oracle within the precision contract on every hidden case: "
    "several shapes (odd sizes too), seeds, and value distributions (large, tiny, shifted, heavy-tailed, "
    "spiky). Compute every element; no shortcuts that only hold for typical inputs.",
    ReasonCode.PRECISION_DOWNGRADE: "Do not compute in a lower precision than the contract allows.",
    ReasonCode.NONDETERMINISTIC: "Two runs of one case must agree: no races, no reads of uninitialised memory.",
    ReasonCode.INPUT_MUTATED: "Never write to the inputs.",
    ReasonCode.OUTPUT_ALIASES_INPUT: "The output must not share storage with an input.",
    ReasonCode.STALE_OUTPUT: "Each call must compute its output from its own inputs: no caching across calls.",
    ReasonCode.TIMING_TAMPER: "Do not touch timers, events, streams or synchronisation to change what is timed.",
    ReasonCode.THREAD_LEAK: "Do not start threads or processes.",
    ReasonCode.FORBIDDEN_CONSTRUCT: "No ctypes, exec/eval, frame or gc inspection, patching of torch or timers, "
    "subclassing the reference Model, or try/except fallbacks to PyTorch.",
    ReasonCode.NO_CUSTOM_KERNEL: "The work must run in kernels your file defines, launched on every forward; a "
    "plain-PyTorch rewrite, or a fallback to PyTorch when a launch fails, is rejected.",
    ReasonCode.LOW_KERNEL_COVERAGE: "Most GPU time must be spent in your own kernels (see the kernel policy).",
    ReasonCode.BELOW_PHYSICAL_FLOOR: "A time below the device's physical floor is rejected as impossible.",
    ReasonCode.DEGENERATE_TASK: None,
    ReasonCode.TASK_ERROR: None,
    ReasonCode.FLAGS_CHANGED: "Do not change numeric flags (TF32, cuDNN, matmul precision).",
    ReasonCode.BUILD_CACHE_TAMPER: "Do not write files, and never into the build cache.",
    ReasonCode.SANITIZER_ERROR: "Memory errors and races are found by compute-sanitizer: no out-of-bounds or "
    "uninitialised accesses, no missing barriers.",
    ReasonCode.INTERNAL_ERROR: None,  # kernelproof's own failure: nothing for the model to fix
    ReasonCode.TOO_LARGE: None,  # the task does not fit the device: nothing for the model to fix
    ReasonCode.PROTOCOL_VIOLATION: "Never write to the worker's descriptors or sockets; return outputs from forward.",
    ReasonCode.MACHINE_BUSY: None,  # the machine was too busy to time: nothing for the model to fix
    ReasonCode.SHAPE_SPECIALIZED: "The kernel must hold for other sizes than the published ones: the probed "
    "shapes (the size constants made odd and about half) are checked too. Mask loads and stores at every "
    "edge and derive sizes from the tensors, never from constants.",
    ReasonCode.HARNESS_HOOKED: "Leave nothing active after forward returns: no torch function or dispatch "
    "modes, no torch.library kernels for aten operators, no replaced torch.Tensor methods, no trace hooks.",
    ReasonCode.ENVIRONMENT: None,  # the machine lacks a CUDA toolkit or device: nothing for the model to fix
    ReasonCode.PROTOCOL_VIOLATION: "Never write to file descriptors or sockets you did not open: the "
    "harness's channel to the evaluator is not the solution's to use.",
}

LANGUAGES = {
    "triton": "Write Triton kernels (@triton.jit) launched from forward. Launch on the inputs' device "
    "(x.device), never a hard-coded 'cuda'.",
    "cuda": "Write CUDA C++ kernels compiled with torch.utils.cpp_extension.load_inline at module level.",
    "any": "Write Triton kernels (@triton.jit) or CUDA C++ kernels (torch.utils.cpp_extension.load_inline at "
    "module level). Launch on the inputs' device, never a hard-coded 'cuda'.",
}

MAX_HISTORY_CHARS = 16_000  # of one earlier answer or file shown again in a later prompt (~4 k tokens)

ANSWER_FORMAT = (
    "Answer with exactly one complete Python file in a single ```python fenced block. The file defines "
    "`class ModelNew(nn.Module)` whose constructor takes the same arguments as `Model` and whose forward "
    "takes the same inputs and returns a tensor of the same shape and dtype. Keep the parameter names of "
    "`Model` (the evaluator copies the reference's weights into yours by name). Imports at the top; no test "
    "code, no `get_inputs`, no prints. Explanations, if any, go before the code block, briefly."
)


@dataclass(frozen=True)
class PromptContext:
    task: TaskInfo  # the problem
    device: DeviceInfo  # where it is judged
    language: str = "triton"  # triton | cuda | any
    sizes: SizesTested | None = None  # the shapes a candidate is tested at; None: the task did not load


def system_text(ctx: PromptContext) -> str:
    rules = "\n".join(f"- {code.value}: {rule}" for code, rule in RULES.items() if rule)
    return (
        "You are an expert GPU kernel engineer. You rewrite a PyTorch reference program as a faster program "
        "built on custom kernels. A strict evaluator judges every answer: it runs your file in an isolated "
        "process on hidden inputs, compares every output element with a float64 oracle, and times it against "
        "PyTorch with confidence intervals. Only verified answers count; a fast wrong answer scores nothing.\n\n"
        f"{LANGUAGES[ctx.language]}\n\n"
        f"Answer format: {ANSWER_FORMAT}\n\n"
        f"What the evaluator rejects (reason code: rule):\n{rules}"
    )


def task_text(ctx: PromptContext) -> str:
    t = ctx.task
    precision = PRECISIONS.get(t.precision, t.precision)
    split = "" if t.split_precision or t.precision != "fp32" else " Split-precision emulation is not allowed."
    sizes = (
        sizes_text(ctx.sizes) + "\n"
        if ctx.sizes is not None
        else "Sizes tested: the task's own and others; derive every size from the tensors.\n"
    )
    return (
        f"# Task: {t.name}\n\n"
        "The reference program (KernelBench format; the evaluator owns its inputs, shapes and weights):\n\n"
        f"```python\n{t.source.rstrip()}\n```\n\n"
        f"{sizes}"
        f"Precision contract: {t.precision}: {precision}.{split}\n"
        f"Kernel policy: {t.policy}: {POLICIES.get(t.policy, t.policy)}.\n"
        f"The reference runs in {t.mode} mode.\n"
        f"Device: {device_text(ctx.device)}"
    )


def draft_prompt(ctx: PromptContext) -> Prompt:
    """A first solution from scratch."""
    return _prompt(ctx, "Write ModelNew: correct first, then as fast as you can make it on this device.")


def refine_prompt(ctx: PromptContext, lineage: list[Candidate], best: Candidate | None) -> Prompt:
    """The next turn of one conversation: each earlier answer, then its feedback."""
    messages = [Message("user", task_text(ctx) + "\n\nWrite ModelNew: correct first, then fast.")]
    for c in lineage:
        messages.append(Message("assistant", earlier_answer(c)))
        messages.append(Message("user", describe_candidate(c) + "\n\n" + _next_step(c, best)))
    return Prompt(system_text(ctx), tuple(messages))


def ideas_prompt(ctx: PromptContext, parent: Candidate | None, n: int, tried: list[Candidate]) -> Prompt:
    """Ask for optimisation ideas in words (the tree strategy's expansion step)."""
    body = [_shown(parent, "The solution to improve") if parent else "There is no verified solution yet."]
    if tried:
        body.append("Earlier attempts from this starting point, and what happened:")
        body += [f"- {c.idea or c.kind}: {_one_line_outcome(c)}" for c in tried]
    body.append(
        f"Propose {n} distinct optimisation ideas for this device, as a numbered list, one or two sentences "
        "each: what to change and why it should be faster. No code in this answer."
    )
    return _prompt(ctx, "\n\n".join(body))


def implement_prompt(ctx: PromptContext, parent: Candidate | None, idea: str) -> Prompt:
    """Implement one idea, starting from the parent (or from scratch)."""
    start = _shown(parent, "Start from this solution") + "\n\n" if parent else ""
    return _prompt(ctx, f"{start}Implement this optimisation idea in a complete ModelNew:\n{idea}")


def mutate_prompt(ctx: PromptContext, parent: Candidate, best: Candidate | None) -> Prompt:
    """Change one solution: repair it when it failed, speed it up when it passed."""
    return _prompt(ctx, _shown(parent, "A solution and its evaluation") + "\n\n" + _next_step(parent, best))


def crossover_prompt(ctx: PromptContext, a: Candidate, b: Candidate) -> Prompt:
    """Combine the strengths of two verified solutions."""
    return _prompt(
        ctx,
        _shown(a, "Solution A")
        + "\n\n"
        + _shown(b, "Solution B")
        + "\n\nWrite one ModelNew that combines the strengths of A and B and is faster than both.",
    )


def _prompt(ctx: PromptContext, ask: str) -> Prompt:
    return Prompt(system_text(ctx), (Message("user", task_text(ctx) + "\n\n" + ask),))


def earlier_answer(c: Candidate) -> str:
    """An earlier answer as a later prompt carries it: whole when short, else its file, else cut."""
    text = c.response or "(no answer)"
    if len(text) <= MAX_HISTORY_CHARS:
        return text
    file = c.source.rstrip()
    if file and len(file) <= MAX_HISTORY_CHARS:
        return (
            f"[This answer of {len(text)} characters is cut to the solution file taken from it "
            f"({len(file)} characters); the other {len(text) - len(file)} characters are left out.]\n\n"
            f"{fence(file, 'python')}"
        )
    return cut_middle(text, MAX_HISTORY_CHARS, "answer")


def cut_middle(text: str, max_chars: int, what: str) -> str:
    """``text`` with its middle replaced by a marker that says how much was cut, when it is too long."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 3 // 4
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} of this {what}'s {len(text)} characters cut here ...]\n{text[-tail:]}"


def _shown(c: Candidate, title: str) -> str:
    code = cut_middle((c.source or c.response).rstrip(), MAX_HISTORY_CHARS, "file")
    return f"{title} ({c.id}):\n\n{fence(code, 'python')}\n\nIts evaluation:\n{describe_candidate(c)}"


def _next_step(c: Candidate, best: Candidate | None) -> str:
    if c.passed and barred(c):
        return (
            f"It passed, but it is flagged {', '.join(barred(c))}: it calls the reference's own operations "
            "outside its kernel launches, so it is never chosen. Do the work in your own kernels and answer "
            "with the complete new file."
        )
    if c.passed:
        return (
            "It is verified. Make it faster: find where the time goes (memory traffic, launches, occupancy) and "
            "remove it, keeping it correct. Answer with the complete new file."
        )
    step = "Fix what the evaluation reports and answer with the complete corrected file."
    if best is not None and best.id != c.id:
        step += f" (The fastest verified solution so far is {best.id}; you may start again from it.)"
    return step


def _one_line_outcome(c: Candidate) -> str:
    if c.rejection is not None:
        return f"not evaluated: {c.rejection.message}"
    if c.verdict is None:
        return "no verdict"
    if c.passed:
        if barred(c):
            return "passed but never chosen: flagged " + ", ".join(barred(c))
        best = best_speedup(c.verdict)
        return "verified" + (f", {best.median:.2f}x" if best is not None else " (no speed claim)")
    return "rejected: " + ", ".join(c.verdict.codes)
