"""The wire: what the parent and a worker say to each other, and nothing else.

Both sides of the trust boundary import this package and only this of each other: the frame format
(protocol.py), what each reply kind may say (schemas.py), the outputs a reply owes before any of its
data is read (expected.py), a failed reply as a reason (replies.py), and large tensors handed over
on the GPU (handoff.py). It holds no policy of either side: the parent's reading of a reply is
kernelproof.host.inbox, the worker's program is kernelproof.worker (I1, I10).
"""
