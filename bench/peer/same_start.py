"""bench/same_start.h in Python, for torch_dist_peer.py: the same SplitMix64 stream, values and
parameter rules, so the Python peer trains from the weights and batches dist_bench draws.

Plain Python floats are IEEE doubles and math.log, cos, sin and sqrt are the C library's, the
same functions the C++ header calls: every double comes out the same, and rounding it to
float32 (torch.tensor(..., dtype=torch.float32)) gives the header's float. Free of torch, so the
tests check its values against the header's without it.
"""
import math

MASK = (1 << 64) - 1


class Stream:
    """SplitMix64 (Steele, Lea and Flood, 2014), as same_start::Stream."""

    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def uniform(self):
        """Uniform in [0, 1), from the top 53 bits."""
        return (self.next() >> 11) * 2.0 ** -53


def uniform_values(seed, count, low, high):
    stream = Stream(seed)
    return [low + (high - low) * stream.uniform() for _ in range(count)]


def normal_values(seed, count):
    """Box-Muller, two values per pair of uniforms, as the header."""
    stream = Stream(seed)
    values = []
    while len(values) < count:
        radius = math.sqrt(-2.0 * math.log(1.0 - stream.uniform()))
        angle = 2.0 * math.pi * stream.uniform()
        values.append(radius * math.cos(angle))
        if len(values) < count:
            values.append(radius * math.sin(angle))
    return values


def integer_values(seed, count, high):
    if high <= 0:
        raise ValueError(f"same_start: high must be positive, not {high}")
    stream = Stream(seed)
    return [stream.next() % high for _ in range(count)]


def parameter_values(index, name, shape):
    """The initial values of a model's index-th parameter (same_start::parameter_values)."""
    count = math.prod(shape)
    seed = 0x5EED0000 + index
    if len(shape) >= 2:
        bound = 1.0 / math.sqrt(count // shape[0])
        return uniform_values(seed, count, -bound, bound)
    if name.endswith("weight"):
        return uniform_values(seed, count, 0.9, 1.1)
    return uniform_values(seed, count, -0.1, 0.1)


def batch_seed(batch):
    """The seed of a batch's inputs (and, + 1, its labels)."""
    return 0xBA7C0000 + 2 * batch


def linear_stack_shapes(widths):
    shapes = []
    for i in range(len(widths) - 1):
        shapes += [[widths[i + 1], widths[i]], [widths[i + 1]]]
    return shapes


STEPS = 20  # same_start::kSteps
POOL_BATCHES = 4  # same_start::kPoolBatches
