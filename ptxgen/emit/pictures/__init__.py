"""Pictures, SVG without a plotting dependency: ``layout.svg`` of a shared-memory stage (``svg``, its side panels
``svg_panels`` and the shared drawing primitives ``svgkit``) and the bar chart of benchmark results (``chart``,
``python -m ptxgen.emit.pictures.chart``)."""
