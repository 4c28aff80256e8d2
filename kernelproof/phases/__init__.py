"""The phases of one evaluation, in the order they run: correctness, then timing."""
