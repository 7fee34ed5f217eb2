"""The HTML page of a report and the escaped pieces every HTML section is built of.

Traces hold arbitrary text (user input, tool output, model output), so every value goes
into the page through `esc` (``html.escape``) or a helper that calls it. The page is self-
contained: inline CSS, images as data URIs, no JavaScript (``<details>`` does the collapsing).
"""
from __future__ import annotations

import base64
import html

from tracefix.report.content.diagnosis import verdict_word
from tracefix.report.content.values import clip

MAX_BLOCK = 4000  # characters of one message or tool result shown in the trace

CSS = """
:root { --fg:#1d232b; --muted:#5d6875; --line:#dde2e8; --bg:#f6f8fa; --card:#fff;
  --ok:#1a7f37; --bad:#cf222e; --warn:#9a6700; --info:#0969da; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.5 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  color:var(--fg); background:var(--bg); }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 60px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 10px;
  border-bottom: 1px solid var(--line); padding-bottom: 4px; } h3 { font-size: 15px; margin: 18px 0 8px; }
.sub { color: var(--muted); font-size: 12px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin: 10px 0; }
.summary { border-left: 4px solid var(--info); font-size: 15px; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; vertical-align: top; padding: 5px 8px; border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 600; white-space: nowrap; }
table.facts th { width: 130px; }
pre, code { font: 12px/1.45 "DejaVu Sans Mono", Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; word-break: break-word; background: var(--bg); border: 1px solid var(--line);
  border-radius: 6px; padding: 8px 10px; margin: 6px 0; max-height: 420px; overflow: auto; }
.badge { display: inline-block; border-radius: 10px; padding: 0 8px; font-size: 12px; font-weight: 600;
  border: 1px solid currentColor; white-space: nowrap; margin-right: 4px; }
.b-ok { color: var(--ok); } .b-bad { color: var(--bad); } .b-warn { color: var(--warn); }
.b-info { color: var(--info); } .b-muted { color: var(--muted); }
.v-validated { color:#fff; background: var(--ok); border-color: var(--ok); }
.v-partially_validated { color:#fff; background:#4d9f5e; border-color:#4d9f5e; }
.v-refuted { color:#fff; background: var(--bad); border-color: var(--bad); }
.v-inconclusive { color:#fff; background:#6e7781; border-color:#6e7781; }
.v-error { color:#fff; background:#9a6700; border-color:#9a6700; }
img.plot { max-width: 100%; height: auto; display: block; margin: 6px 0; }
details { margin: 4px 0; } summary { cursor: pointer; }
details.step { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 4px 10px; }
details.step[open] { padding-bottom: 10px; }
details.step.err { border-left: 4px solid var(--bad); }
details.step.got-past { border-left: 4px solid var(--warn); }
details.step.frontier { box-shadow: inset 0 0 0 1px #f0a3a8; }
.stepno { font-weight: 700; display: inline-block; min-width: 62px; }
.agent { font-weight: 600; color: #3d4b5c; }
.act { color: var(--muted); }
.trial { margin: 18px 0 6px; font-weight: 600; }
.gap { margin: 6px 0 6px 12px; color: #666; font-style: italic; }
.trial .badge { font-weight: 600; }
.msg-role { font-size: 12px; color: var(--muted); margin-top: 6px; }
.grid { display: grid; gap: 8px; overflow-x: auto; }
.col { background: var(--card); border: 1px solid var(--line); border-radius: 6px; min-width: 0; }
.col h4 { margin: 0; padding: 6px 8px; font-size: 12.5px; border-bottom: 1px solid var(--line); background: var(--bg); }
.col .ln { font: 11.5px/1.4 "DejaVu Sans Mono", Menlo, monospace; padding: 1px 8px; white-space: pre-wrap;
  word-break: break-word; }
.col .ln .n { color: var(--muted); }
.ln.chg { background: #dafbe1; } .ln.gone { background: #ffebe9; }
.beforeafter { display: grid; grid-template-columns: 1fr 1fr; gap: 8px; }
.beforeafter pre { max-height: 260px; }
.muted { color: var(--muted); }
footer { margin-top: 40px; color: var(--muted); font-size: 12px; }
"""


def esc(value) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def badge(text, cls: str) -> str:
    return f'<span class="badge {cls}">{esc(text)}</span>'


def verdict_badge(verdict) -> str:
    return f'<span class="badge v-{esc(verdict or "none")}">{esc(verdict_word(verdict))}</span>'


def outcome_badge(outcome) -> str:
    cls = {"success": "b-ok", "failure": "b-bad"}.get(outcome or "", "b-muted")
    return badge(outcome or "outcome unknown", cls)


def yes_no_badge(value) -> str:
    if value is None:
        return '<span class="muted">—</span>'
    return badge("yes", "b-ok") if value else badge("no", "b-bad")


def pre(text, limit: int = MAX_BLOCK) -> str:
    return f"<pre>{esc(clip(str(text), limit))}</pre>"


def img(png: bytes | None, alt: str) -> str:
    if not png:
        return f'<p class="muted">{esc(alt)}: nothing to draw.</p>'
    data = base64.b64encode(png).decode("ascii")
    return f'<img class="plot" alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def page(title: str, body: str) -> str:
    """The HTML page shell: one self-contained page, CSS inline."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body><main>{body}</main></body></html>\n")
