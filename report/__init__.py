"""tracefix.report: the root-cause report of a session, in HTML and Markdown.

The top part of the pipeline: it reads the session document, the analysis result and the
replay result (docs/contracts.md) and renders them; it imports the parts below it, never
the other way round (docs/architecture.md). Inside it, imports run one way too, down this list:

    cli.py       `tracefix report SESSION`
    stored.py    a stored session's report: its inputs read from the store, rendered
                 (the collector's report route, `tracefix report`)
    index.py     one page linking several reports (the demo's)
    render.py    the list of sections in page order, written as HTML or as Markdown
    sections/    one module per section, its HTML and Markdown writers side by side
    page.py      the HTML page: CSS, shell, escaped pieces
    markdown.py  escaped Markdown: inline text, fenced blocks
    plots.py     the graph and score pictures (matplotlib, embedded as PNG)
    content/     what the report says (session facts, hypotheses, trace, replays, summary),
                 format-free
"""
