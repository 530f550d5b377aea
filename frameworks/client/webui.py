"""HTML building blocks for the framework services' web pages (the batch and elastic jobs pages,
reached from the master's web UI through each framework's ``webui_url``), pure.

The same rules as the master's UI, from the same primitives (``protocol/html.py``; a framework
cannot import ``master``): every value is escaped unless it is ``Html`` built
here, URLs are built with ``quote``/``urlencode``, the pages work without JavaScript except the
live log. The log view (``log_view``) follows a task's output through the service's own logs API
(``data-src``, answered ``{"data", "offset", "attempt" or "task_id"}`` from a byte ``offset``),
appending text nodes (never markup) every second; a new attempt (a retry, another worker) starts
the view again.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Sequence

from protocol.html import Html as Html
from protocol.html import esc as esc
from protocol.html import join as join
from protocol.html import link as link
from protocol.html import path as path
from protocol.html import tag as tag

__pure__ = True


def external_link(url: str | None, text: object | None = None) -> Html:
    """A link only to an http(s) URL; anything else as text."""
    if url and url.lower().startswith(("http://", "https://")):
        return tag("a", url if text is None else text, href=url, rel="noopener noreferrer")
    return esc(url or "-")


def table(headers: Sequence[object], rows: Iterable[Sequence[object]], *, empty: str = "none",
          cls: str | None = None) -> Html:
    body = [tag("tr", *(tag("td", c) for c in row)) for row in rows]
    if not body:
        return tag("p", empty, cls="empty")
    return tag("table", tag("thead", tag("tr", *(tag("th", h) for h in headers))), tag("tbody", *body), cls=cls)


def definitions(items: Iterable[tuple[object, object]]) -> Html:
    return tag("dl", *(Html(tag("dt", k) + tag("dd", v)) for k, v in items), cls="facts")


def section(title: str, *content: object) -> Html:
    return tag("section", tag("h2", title), *content)


def number(value: object, digits: int = 3) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return "-" if value is None else str(value)
    text = f"{float(value):.{digits}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def timestamp(epoch: object) -> str:
    if not isinstance(epoch, int | float) or epoch <= 0:
        return "-"
    return datetime.datetime.fromtimestamp(float(epoch), tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(start: object, end: object) -> str:
    if not isinstance(start, int | float) or not isinstance(end, int | float) or end < start:
        return "-"
    s = int(end - start)
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h {m}m {sec}s" if h else f"{m}m {sec}s" if m else f"{number(round(end - start, 1))}s"


def megabytes(n: object) -> str:
    if not isinstance(n, int | float):
        return "-"
    return f"{n / 2**20:.1f} MB"


def state_badge(state: object) -> Html:
    text = str(state)
    return tag("span", text, cls=f"state state-{text.removeprefix('TASK_').lower()}")


STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2230;background:#f6f7f9}
header{background:#20293a;color:#fff;padding:.5em 1em;display:flex;gap:1.2em;align-items:center;flex-wrap:wrap}
header a{color:#cfe0ff;text-decoration:none}header a:hover{text-decoration:underline}
header .brand{font-weight:600;color:#fff}
main{padding:1em 1.5em;max-width:1400px}
h1{font-size:1.4em;margin:.2em 0 .6em}h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;background:#fff;margin:.3em 0 1em;min-width:30%}
th,td{border:1px solid #d8dce3;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#eef1f5;font-weight:600}
dl.facts{display:grid;grid-template-columns:max-content auto;gap:.2em 1em;margin:.3em 0 1em}
dl.facts dt{font-weight:600}dl.facts dd{margin:0}
.state{padding:0 .4em;border-radius:3px;background:#e3e6ea;font-size:.9em}
.state-running,.state-succeeded,.state-finished{background:#cdeccd}
.state-failed,.state-error,.state-lost{background:#f7d0d0}.state-cancelled,.state-killed{background:#f5e3c4}
.empty{color:#777;font-style:italic}.note{color:#555;font-size:.92em}
.error{background:#fdecea;border:1px solid #f5c2c0;padding:.6em 1em}
pre.log{background:#11151c;color:#dfe6ee;padding:.8em;overflow:auto;max-height:60vh;white-space:pre-wrap;min-height:3em}
.pailer-bar{display:flex;gap:1em;align-items:center;flex-wrap:wrap}#pailer-status{color:#555;font-size:.9em}
"""

# The live log: while "follow" is ticked, ask data-src for what the file grew by since the last
# byte offset (UTF-8 bytes of what came), append it as text, and ask again at once after a whole
# chunk; an answer for another attempt (a retry) or task empties the view and starts at 0. An
# answer from output the service kept after the sandbox was removed ("kept") says so in the status.
SCRIPT = """
(function(){
var log=document.getElementById('log'),follow=document.getElementById('follow'),
status=document.getElementById('pailer-status');
if(!log||!log.dataset.src||!follow)return;
var busy=false,enc=new TextEncoder(),chunk=parseInt(log.dataset.chunk||'65536',10);
var say=function(t){if(status)status.textContent=t;};
var poll=function(){if(busy||!follow.checked)return;busy=true;var off=log.dataset.offset||'0';
fetch(log.dataset.src+'&offset='+off,{cache:'no-store',credentials:'same-origin'}).then(function(r){
return r.json().then(function(d){if(!r.ok)throw new Error(d.error||('HTTP '+r.status));return d;});
}).then(function(d){busy=false;var gen=d.attempt!==undefined?d.attempt:d.task_id;
if(gen!==undefined&&log.dataset.gen!==undefined&&String(gen)!==log.dataset.gen){
log.textContent='';log.dataset.offset='0';log.dataset.gen=String(gen);poll();return;}
if(gen!==undefined)log.dataset.gen=String(gen);
var more=false;if(d.data){var n=enc.encode(d.data).length;
var end=log.scrollTop+log.clientHeight>=log.scrollHeight-8;
log.appendChild(document.createTextNode(d.data));log.dataset.offset=String(d.offset+n);
if(end)log.scrollTop=log.scrollHeight;more=n>=chunk;}
say((d.kept&&d.kept.note?d.kept.note+'; ':'')+'following: '+log.dataset.offset+' bytes');if(more)poll();
}).catch(function(e){busy=false;say('not following: '+e.message);});};
follow.addEventListener('change',function(){say(follow.checked?'following':'paused');poll();});
poll();setInterval(poll,1000);
})();
"""


def log_view(src: str, caption: str) -> Html:
    """A live log of one task's output: ``src`` is the service's logs API for it (an ``offset``
    is appended), followed from the start of the file."""
    bar = tag(
        "div",
        tag("span", caption),
        tag("label", Html('<input type="checkbox" id="follow" checked> '), "follow"),
        tag("span", "starting", id="pailer-status"),
        cls="pailer-bar",
    )
    return Html(bar + tag("pre", "", id="log", cls="log", data_src=src, data_offset="0", data_chunk="65536"))


def page(service: str, title: str, body: object, *, nav: Sequence[tuple[str, str]] = (), master: str | None = None,
         principal: str | None = None) -> Html:
    links = [link(href, text) for href, text in nav]
    if master:
        links.append(external_link(master, "master"))
    who = tag("span", f"signed in as {principal}", cls="note") if principal else ""
    return Html(
        "<!DOCTYPE html>\n"
        + tag(
            "html",
            tag(
                "head",
                Html('<meta charset="utf-8">'),
                Html('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                tag("title", f"{title} - {service}"),
                tag("style", Html(STYLE)),
            ),
            tag(
                "body",
                tag("header", tag("span", service, cls="brand"), join(links), who),
                tag("main", tag("h1", title), body),
                tag("script", Html(SCRIPT)),
            ),
            lang="en",
        )
    )


def error_page(service: str, status: int, message: str) -> Html:
    return page(service, f"HTTP {status}", tag("p", message, cls="error"))
