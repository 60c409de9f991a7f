"""The mbarrier primitive of the pipeline simulation (PTX ISA 'mbarrier'; see ptxgen.model.sim.pipesim): arrivals,
transaction bytes, phases and parity waits. Independent: imports nothing from ptxgen.
"""

from __future__ import annotations


class MBarrier:
    def __init__(self, name: str, count: int):
        self.name, self.count = name, count
        self.pending, self.tx, self.phase = count, 0, 0
        self.waiters: list = []
        self.misuse: list[str] = []

    def _maybe_complete(self) -> bool:
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count
            return True
        return False

    def arrive(self) -> bool:
        """One arrival; True when it completed the phase."""
        if self.pending == 0:
            self.misuse.append(f"arrive on {self.name} in phase {self.phase} with no arrival pending (undefined behaviour)")
            return False
        self.pending -= 1
        return self._maybe_complete()

    def expect_tx(self, nbytes: int) -> bool:
        self.tx += nbytes
        return self._maybe_complete()

    def arrive_expect_tx(self, nbytes: int) -> bool:
        self.tx += nbytes
        return self.arrive()

    def complete_tx(self, nbytes: int) -> bool:
        self.tx -= nbytes
        return self._maybe_complete()

    def test_wait(self, parity: int) -> bool:
        """try_wait.parity: has the phase with this parity completed?"""
        return (self.phase & 1) != parity

    def mid_phase(self) -> bool:
        return self.pending != self.count or self.tx != 0

    def state(self) -> str:
        return f"{self.name}: phase {self.phase}, {self.pending} of {self.count} arrivals pending, tx-count {self.tx}"
