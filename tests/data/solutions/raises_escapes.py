"""Raises from forward with a message built to take over the terminal of whoever reads the verdict.

OSC 0 (window title), an OSC 8 hyperlink, CSI cursor-up and erase-line, a carriage return and a
green forged PASS line, an 8-bit CSI, a right-to-left override, Rich markup and Markdown/HTML.
"""

import torch.nn as nn

HOSTILE = (
    "\x1b]0;pwned title\x07"
    "\x1b]8;;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\"
    " \x1b[1A\x1b[2K\r\x1b[32mPASS  forged line\x1b[0m"
    " [bold red]markup[/] \x9b2J \u202egnp.exe"
    " ![x](https://evil.example/p.png) <img src=https://evil.example/q.png> [here](https://evil.example/)"
)


class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x):
        raise RuntimeError(HOSTILE)
