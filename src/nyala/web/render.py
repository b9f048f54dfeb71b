"""A page as HTML (one self-contained document, no scripts) or as JSON."""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from urllib.parse import urlencode

from nyala.web.view import Badge, Cell, Fields, Link, Page, Table, Text

__all__ = ["render_html", "render_json"]

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #1d232a; background: #f6f7f9; }
header { background: #243447; color: #fff; padding: 10px 20px; display: flex; gap: 18px; align-items: baseline;
         flex-wrap: wrap; }
header .brand { font-weight: 700; font-size: 18px; }
header a { color: #cfe3ff; text-decoration: none; }
header a:hover { text-decoration: underline; }
main { padding: 12px 20px 40px; }
h1 { font-size: 22px; margin: 8px 0 14px; }
h2 { font-size: 16px; margin: 22px 0 8px; }
table { border-collapse: collapse; background: #fff; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
th, td { padding: 5px 10px; border-bottom: 1px solid #e4e7eb; text-align: left; font-size: 13px;
         vertical-align: top; }
th { background: #eef1f5; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
table.fields th { width: 200px; }
.badge { border-radius: 3px; padding: 1px 6px; font-size: 12px; font-weight: 600; }
.good { background: #d8f5dd; color: #176428; } .warn { background: #fff1c7; color: #7a5a00; }
.bad { background: #ffd9d6; color: #9b1c12; } .plain { background: #e8ebef; color: #39424c; }
pre { background: #fff; padding: 10px; overflow-x: auto; font-size: 12px; box-shadow: 0 1px 2px rgba(0,0,0,.08); }
.pager { margin: 6px 0; font-size: 13px; } .pager a { margin-right: 12px; }
.json { font-size: 12px; margin-left: auto; }
"""


def render_json(page: Page) -> str:
    return json.dumps(page.to_json(), indent=1, sort_keys=False, default=str)


def render_html(
    page: Page, *, server_title: str, nav: Sequence[tuple[str, str]], path: str, query: Sequence[tuple[str, str]]
) -> str:
    """The page as an HTML document; ``path`` and ``query`` build the pager's and JSON links."""
    out = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'>",
        f"<title>{_e(page.title)} - {_e(server_title)}</title><style>{_STYLE}</style></head><body><header>",
        f"<span class='brand'>{_e(server_title)}</span>",
    ]
    out += [f"<a href='{_e(href)}'>{_e(text)}</a>" for text, href in nav]
    json_query = urlencode([*[(k, v) for k, v in query if k != "format"], ("format", "json")])
    out.append(f"<a class='json' href='{_e(path)}?{_e(json_query)}'>JSON</a></header><main>")
    out.append(f"<h1>{_e(page.title)}</h1>")
    for section in page.sections:
        if section.title:
            out.append(f"<h2>{_e(section.title)}</h2>")
        if isinstance(section, Fields):
            out.append(_fields(section))
        elif isinstance(section, Table):
            out.append(_table(section, path, query))
        elif isinstance(section, Text):
            out.append(f"<pre>{_e(section.text)}</pre>")
    out.append("</main></body></html>")
    return "".join(out)


def _fields(section: Fields) -> str:
    rows = "".join(f"<tr><th>{_e(_label(k))}</th>{_cell(v)}</tr>" for k, v in section.items.items())
    return f"<table class='fields' id='{_e(section.name)}'>{rows}</table>"


def _table(section: Table, path: str, query: Sequence[tuple[str, str]]) -> str:
    parts = []
    pager = _pager(section, path, query)
    head = "".join(f"<th>{_e(_label(c))}</th>" for c in section.columns)
    parts.append(f"{pager}<table id='{_e(section.name)}'><thead><tr>{head}</tr></thead><tbody>")
    if not section.rows:
        parts.append(f"<tr><td colspan='{len(section.columns)}'>none</td></tr>")
    for row in section.rows:
        parts.append("<tr>" + "".join(_cell(v) for v in row) + "</tr>")
    parts.append("</tbody></table>")
    return "".join(parts)


def _pager(section: Table, path: str, query: Sequence[tuple[str, str]]) -> str:
    if section.total is None:
        return ""
    shown_to = section.offset + len(section.rows)
    text = [f"rows {section.offset + 1 if section.rows else 0} to {shown_to} of {section.total}"]
    others = [(k, v) for k, v in query if k not in {"offset", "limit"}]

    def link(offset: int, label: str) -> str:
        q = urlencode([*others, ("offset", str(offset)), ("limit", str(section.limit))])
        return f"<a href='{_e(path)}?{_e(q)}'>{label}</a>"

    if section.offset > 0:
        text.append(link(max(0, section.offset - section.limit), "&larr; previous"))
    if shown_to < section.total:
        text.append(link(shown_to, "next &rarr;"))
    return f"<div class='pager'>{' '.join(text)}</div>"


def _cell(value: Cell) -> str:
    if isinstance(value, Link):
        return f"<td><a href='{_e(value.href)}'>{_e(value.text)}</a></td>"
    if isinstance(value, Badge):
        return f"<td><span class='badge {value.level}'>{_e(value.text)}</span></td>"
    if isinstance(value, bool):
        return f"<td>{'yes' if value else 'no'}</td>"
    if isinstance(value, int | float):
        return f"<td class='num'>{_e(_number(value))}</td>"
    if isinstance(value, list):
        return f"<td>{'<br>'.join(_e(v) for v in value)}</td>"
    return f"<td>{_e('' if value is None else str(value))}</td>"


def _number(value: int | float) -> str:
    return f"{value:,}" if isinstance(value, int) else f"{value:,.3f}"


def _label(name: str) -> str:
    text = name.replace("_", " ")
    return text[:1].upper() + text[1:]


def _e(text: str) -> str:
    return html.escape(text, quote=True)
