"""The bridges that feed derived plans (``ptxgen.derive``) to the independent models of ``layouts``, ``numerics`` and
``sim``, the L1 checks: the loader's writes against the read model (``verify``, ``verify_pair`` for the CTA pair,
``verify_scales``, ``verify_grouped``), the pipeline through the simulator (``check_pipeline``), and the epilogues'
stores and loads (``check_store``, ``check_mstore``, ``check_dstore``, ``check_cload``, ``check_fusion``)."""
