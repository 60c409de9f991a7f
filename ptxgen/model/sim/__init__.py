"""The independent simulation of the warp-specialized mbarrier pipeline (imports nothing of ptxgen): the simulator
(``pipesim``), its configuration and state (``pipesim_state``), its agents (``pipesim_agents``), the mbarrier primitive
(``mbarrier``), and the model of the consumers' turns at the epilogue (``ordermodel``)."""
