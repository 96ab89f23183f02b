"""Java's ``java.util.Random``, for porting Druid tests that draw from a seeded one."""

from __future__ import annotations


class JavaRandom:
    """java.util.Random (48-bit LCG), enough for ``nextInt(bound)``; checked against a JVM."""

    MASK = (1 << 48) - 1

    def __init__(self, seed: int):
        self.seed = (seed ^ 0x5DEECE66D) & self.MASK

    def _next(self, bits: int) -> int:
        self.seed = (self.seed * 0x5DEECE66D + 0xB) & self.MASK
        value = self.seed >> (48 - bits)
        return value - (1 << 32) if value >= (1 << 31) else value

    def next_int(self, bound: int) -> int:
        r = self._next(31)
        m = bound - 1
        if bound & m == 0:
            return (bound * r) >> 31
        u = r
        while True:
            r = u % bound
            if (u - r + m) & 0xFFFFFFFF < (1 << 31):  # Java's int-overflow rejection test
                return r
            u = self._next(31)
