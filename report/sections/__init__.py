"""The sections of a root-cause report, one module each, every section written both as HTML
and as Markdown side by side (what it says comes from ``tracefix.report.content``):

    base.py           Report (what one report is drawn from) and Section (one part of it)
    overview.py       the title line, the summary paragraph, the session at a glance
    hypotheses.py     the ranked failure hypotheses and their evidence
    interventions.py  each tested intervention, its replays and their diff with the original
    pictures.py       the critical transition graph and the anomaly scores
    trace.py          the steps, grouped by trial
    stages.py         how the diagnosis was made; the page footer

``tracefix.report.render.SECTIONS`` puts them in page order.
"""
