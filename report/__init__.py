"""tracefix.report: the root-cause report of a session, in HTML and Markdown.

The top part of the pipeline: it reads the session document, the analysis result and the
replay result (docs/contracts.md) and renders them; it imports the parts below it, never
the other way round (docs/architecture.md).

    content.py   what the report says (hypotheses, replays, diffs), format-free
    render.py    the sections of the report, written as HTML or Markdown
    plots.py     the score and replay figures (matplotlib, embedded as PNG)
    cli.py       `tracefix report SESSION`
"""
