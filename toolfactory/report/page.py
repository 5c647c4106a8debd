"""The report's HTML page: one self-contained file (inline CSS, no JavaScript) that shows the
charts saved next to it and the tables of the same numbers.

Every string that comes from data (run ids, stage names, reasons, domains, clusters, alt texts)
goes through :func:`html.escape`; nothing is inserted unescaped but the page's own markup.
"""

from __future__ import annotations

from html import escape
from typing import Mapping, Sequence

from toolfactory.report.samples import Chat, Turn
from toolfactory.report.sections import Section, Table

_STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 72rem;
       padding: 0 1rem; color: #1a202c; line-height: 1.4; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2.5rem; border-bottom: 1px solid #e2e8f0; }
nav a { margin-right: 1rem; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: .2rem 1rem; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
figure { margin: 1rem 0; } figure img { max-width: 100%; height: auto; border: 1px solid #edf2f7; }
figcaption, caption { color: #4a5568; font-size: .9rem; text-align: left; padding: .3rem 0; }
table { border-collapse: collapse; margin: 1rem 0; font-size: .9rem; }
th, td { border-bottom: 1px solid #e2e8f0; padding: .25rem .6rem; text-align: left; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
p.note { background: #fffaf0; border-left: 3px solid #dd6b20; padding: .4rem .8rem; }
p.warning { background: #fff5f5; border: 2px solid #c53030; padding: .6rem 1rem; font-weight: 600; }
pre { background: #f7fafc; padding: .4rem .6rem; overflow-x: auto; white-space: pre-wrap; margin: .2rem 0; font-size: .85rem; }
article.chat { border: 1px solid #e2e8f0; border-radius: 6px; margin: 1rem 0; padding: .5rem 1rem; }
article.chat h3 { font-size: 1rem; margin: .3rem 0 .6rem; }
div.turn { margin: .4rem 0; padding: .3rem .6rem; border-radius: 6px; max-width: 85%; }
div.turn .who { font-size: .75rem; color: #4a5568; text-transform: uppercase; letter-spacing: .03em; }
div.system { background: #edf2f7; max-width: 100%; }
div.user { background: #ebf8ff; margin-left: auto; }
div.assistant { background: #f0fff4; }
div.tool { background: #fefcbf; font-size: .9rem; }
ul.links li { margin: .2rem 0; }
"""


def _is_number(text: str) -> bool:
    return text.replace(",", "").replace(".", "").replace("%", "").replace("/", "").lstrip("-").isdigit()


def _table(table: Table) -> str:
    head = "".join(f"<th scope=\"col\">{escape(h)}</th>" for h in table.header)
    body = "\n".join(
        "<tr>" + "".join(f"<td class=\"n\">{escape(c)}</td>" if _is_number(c) else f"<td>{escape(c)}</td>" for c in row) + "</tr>"
        for row in table.rows
    )
    return (f"<table id=\"{escape(table.id)}\">\n<caption>{escape(table.caption)}</caption>\n"
            f"<thead><tr>{head}</tr></thead>\n<tbody>\n{body}\n</tbody>\n</table>")


def _turn(turn: Turn) -> str:
    who = {"tool": f"tool result · {turn.name}" if turn.name else "tool result"}.get(turn.role, turn.role)
    parts = [f"<div class=\"turn {escape(turn.role)}\"><div class=\"who\">{escape(who)}</div>"]
    if turn.text:
        parts.append(f"<pre>{escape(turn.text)}</pre>" if turn.role == "tool" else f"<div>{escape(turn.text)}</div>")
    for name, arguments in turn.calls:
        parts.append(f"<div>calls <code>{escape(name)}</code></div><pre>{escape(arguments)}</pre>")
    parts.append("</div>")
    return "".join(parts)


def _chat(chat: Chat) -> str:
    turns = "\n".join(_turn(t) for t in chat.turns)
    return f"<article class=\"chat\">\n<h3>{escape(chat.title)} <small>{escape(chat.record_id)}</small></h3>\n{turns}\n</article>"


def _section(section: Section) -> str:
    parts = [f"<section id=\"{escape(section.id)}\">", f"<h2>{escape(section.title)}</h2>"]
    parts += [f"<p class=\"note\">{escape(note)}</p>" for note in section.notes]
    for chart in section.charts:
        parts.append(f"<figure><img src=\"{escape(chart.file)}\" alt=\"{escape(chart.alt)}\">"
                     f"<figcaption>{escape(chart.title)}</figcaption></figure>")
    parts += [_table(table) for table in section.tables if table.rows]
    parts += [f"<pre><code>{escape(command)}</code></pre>" for command in section.commands]
    if section.links:
        items = "".join(f"<li><a href=\"{escape(href)}\">{escape(label)}</a></li>" for label, href in section.links)
        parts.append(f"<ul class=\"links\">{items}</ul>")
    parts += [_chat(chat) for chat in section.chats]
    parts.append("</section>")
    return "\n".join(parts)


def render_page(title: str, facts: Mapping[str, str], sections: Sequence[Section], warning: str | None = None) -> str:
    """The whole page: a title, a warning when there is one, the run's facts (a definition list),
    a table of contents and the sections in order."""
    items = "\n".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts.items())
    nav = " ".join(f"<a href=\"#{escape(s.id)}\">{escape(s.title)}</a>" for s in sections)
    body = "\n".join(_section(s) for s in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{escape(title)}</title>\n<style>{_STYLE}</style>\n</head>\n<body>\n"
        f"<h1>{escape(title)}</h1>\n"
        + (f"<p class=\"warning\" id=\"warning\">{escape(warning)}</p>\n" if warning else "")
        + f"<dl class=\"facts\">\n{items}\n</dl>\n<nav>{nav}</nav>\n{body}\n</body>\n</html>\n"
    )
