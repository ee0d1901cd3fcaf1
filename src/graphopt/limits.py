"""Numeric limits of the contract: what the scorers' integer and float types hold exactly.

The fast scorer keeps bytes in int64 and per-copy reader counts in int32, indexes ops in int32
and keeps one state per (tensor, device) copy; the reference scorer uses Python integers. Inputs
beyond these limits are refused with a message naming the limit, so the two scorers can never
disagree by a wrap-around, and no request spends minutes and gigabytes before failing.
docs/format.md states them for users.
"""

from __future__ import annotations

MAX_DEVICES = 512
"""Most devices a machine or solution may have: with every device's peak within
`MAX_TOTAL_BYTES`, the bytes over capacity summed over devices still fit int64."""

MAX_ITEMS = 2**30
"""Most ops, tensors or (tensor, consumer) edges a graph may have (int32 indices and counts)."""

MAX_TOTAL_BYTES = 2**53
"""Largest sum of all tensor sizes plus all temp memory: every peak is then exact in int64 and
in a JSON reader's float64 (2**53 bytes is 8 PiB)."""

MAX_COPIES = 2**26
"""Largest tensors x devices product: the scorer holds a state for every possible copy."""

MAX_CAPACITY = 2**63 - 1
"""Largest per-device memory capacity (int64)."""
