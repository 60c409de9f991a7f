"""Which kernel runs a problem on a device: the chooser, one package with one entry.

``choose(problem, device) -> Choice`` (``walk.choose``). A first call walks down, never back:

    walk (the rules in ``rules.ORDER``) -> swap, narrow, pitch (each rule's tile arithmetic) -> costmodel (one
    ``CostModel`` per call: the cost-model rule, the swap rule and the stream-K forms all ask it) -> calibration (the
    device's constants) -> candidates, choice, rules (data)

``tune`` holds the tuning tables and ``ptxgen tune``'s search; ``calibrate`` measures a device
(``ptxgen tune --calibrate``) and ``fit`` turns the measurements into a calibration.
"""

from .choice import Choice, Device, Problem
from .rules import BORROWS_TABLE
from .narrow import small_m_tile, small_m_wide_ctas, tile_fit
from .walk import choose, choose_spec

__all__ = ["BORROWS_TABLE", "Choice", "Device", "Problem", "choose", "choose_spec", "small_m_tile", "small_m_wide_ctas",
           "tile_fit"]
