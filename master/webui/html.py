"""HTML building blocks for the master's web UI: escaping by default, links, tables, the page
layout with its stylesheet and the few lines of optional JavaScript, number formatting.

Every dynamic value goes through ``esc`` unless it is already ``Html`` (markup this module or
``master.webui.pages`` built), so a framework name or an agent attribute holding ``<script>`` is
shown, never run. URLs are built with ``urllib.parse.quote``/``urlencode`` and then escaped as
attribute values.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence

from protocol.html import Html as Html
from protocol.html import esc as esc
from protocol.html import join as join
from protocol.html import link as link
from protocol.html import path as path
from protocol.html import tag as tag

__pure__ = True

RESOURCE_NAMES = ("cpus", "mem", "disk", "gpus")


def agent_link(agent_id: str, text: object | None = None) -> Html:
    """A link to the agent's page (a table cuts a long id short: the whole one on hover)."""
    return tag("a", agent_id if text is None else text, href=path("ui", "agents", agent_id), title=agent_id)


def framework_link(framework_id: str, text: object | None = None) -> Html:
    """A link to the framework's page; ``text`` is usually its name, the id is shown on hover."""
    return tag("a", text or framework_id, href=path("ui", "frameworks", framework_id),
               title=framework_id, cls="fw")


def external_link(url: str) -> Html:
    """A link to a user-supplied URL only when it is http(s); anything else shown as text."""
    if url.lower().startswith(("http://", "https://")):
        return tag("a", url, href=url, rel="noopener noreferrer")
    return esc(url)


def table(headers: Sequence[object], rows: Iterable[Sequence[object]], *, cls: str | None = None,
          empty: str = "none") -> Html:
    """Cells that are ``Html`` go in as they are, anything else escaped after ``str()``. A table
    wider than the page scrolls sideways in its own box; the page keeps its width."""
    body = [tag("tr", *(tag("td", c) for c in row)) for row in rows]
    if not body:
        return tag("p", empty, cls="empty")
    head = tag("thead", tag("tr", *(tag("th", h) for h in headers)))
    return tag("div", tag("table", head, tag("tbody", *body), cls=cls), cls="table-box")


def definitions(items: Iterable[tuple[object, object]]) -> Html:
    """A two-column key/value list."""
    return tag("dl", *(Html(tag("dt", k) + tag("dd", v)) for k, v in items), cls="facts")


def section(title: str, *content: object) -> Html:
    return tag("section", tag("h2", title), *content)


# --- formatting -----------------------------------------------------------------------------------


def number(value: object) -> str:
    """A scalar without float noise: ``2``, ``0.5``, ``1.25``."""
    if not isinstance(value, int | float):
        return str(value)
    text = f"{float(value):.3f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def megabytes(value: object) -> str:
    """A Mesos mem/disk scalar (MB) for people: ``512 MB``, ``4 GB``, ``1.5 TB``."""
    if not isinstance(value, int | float):
        return str(value)
    v = float(value)
    for unit, size in (("TB", 1024.0 * 1024.0), ("GB", 1024.0)):
        if abs(v) >= size:
            return f"{number(round(v / size, 2))} {unit}"
    return f"{number(round(v, 2))} MB"


def amount(name: str, value: object) -> str:
    return megabytes(value) if name in ("mem", "disk") else number(value)


def resources_text(res: Mapping[str, object] | None) -> str:
    """``cpus 2, mem 1 GB`` for the non-zero scalars (and any ranges/sets) of a legacy dict."""
    parts = []
    order = {n: i for i, n in enumerate(RESOURCE_NAMES)}
    for name, value in sorted((res or {}).items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0])):
        if isinstance(value, int | float) and value == 0:
            continue
        parts.append(f"{name} {amount(name, value)}")
    return ", ".join(parts) or "-"


def timestamp(epoch: object) -> str:
    if not isinstance(epoch, int | float) or epoch <= 0:
        return "-"
    when = datetime.datetime.fromtimestamp(float(epoch), tz=datetime.UTC)
    return when.strftime("%Y-%m-%d %H:%M:%S UTC")


def duration(secs: object) -> str:
    if not isinstance(secs, int | float) or secs < 0:
        return "-"
    s = int(secs)
    d, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    if d:
        return f"{d}d {h}h {m}m"
    if h:
        return f"{h}h {m}m {s}s"
    if m:
        return f"{m}m {s}s"
    return f"{number(round(float(secs), 1))}s"


def state_badge(state: object) -> Html:
    text = str(state)
    kind = text.removeprefix("TASK_").lower()
    return tag("span", text, cls=f"state state-{kind}")


# --- the page -------------------------------------------------------------------------------------

NAV = (
    ("/", "Summary"),
    ("/ui/agents", "Agents"),
    ("/ui/frameworks", "Frameworks"),
    ("/ui/tasks", "Tasks"),
    ("/ui/offers", "Offers"),
    ("/ui/roles", "Roles"),
    ("/ui/maintenance", "Maintenance"),
    ("/metrics/snapshot", "Metrics (JSON)"),
    ("/state", "State (JSON)"),
)

STYLE = """
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#1d2230;background:#f6f7f9}
header{background:#20293a;color:#fff;padding:.5em 1em;display:flex;gap:1.2em;align-items:center;flex-wrap:wrap}
header a{color:#cfe0ff;text-decoration:none}header a:hover{text-decoration:underline}
header .brand{font-weight:600;color:#fff}
main{padding:1em 1.5em;max-width:1400px}
h1{font-size:1.4em;margin:.2em 0 .6em}h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;background:#fff;margin:.3em 0 1em;min-width:30%}
th,td{border:1px solid #d8dce3;padding:.25em .6em;text-align:left;vertical-align:top;overflow-wrap:break-word}
td a{display:inline-block;max-width:28em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom}
td span.id{display:inline-block;max-width:28em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;vertical-align:bottom}
div.table-box{overflow-x:auto;max-width:100%}
h1,.note,dl.facts dd,td .wrap{overflow-wrap:anywhere;min-width:0}.state{white-space:nowrap}
th{background:#eef1f5;font-weight:600}td.num,th.num{text-align:right}
dl.facts{display:grid;grid-template-columns:max-content minmax(0,1fr);gap:.2em 1em;margin:.3em 0 1em}
dl.facts dt{font-weight:600}dl.facts dd{margin:0}
.state{padding:0 .4em;border-radius:3px;background:#e3e6ea;font-size:.9em}
.state-running{background:#cdeccd}.state-finished{background:#d6e4f5}
.state-failed,.state-error,.state-lost,.state-dropped,.state-gone{background:#f7d0d0}
.state-killed,.state-killing,.state-unreachable{background:#f5e3c4}
.empty{color:#777;font-style:italic}.note{color:#555;font-size:.92em}
.error{background:#fdecea;border:1px solid #f5c2c0;padding:.6em 1em}
pre.log{background:#11151c;color:#dfe6ee;padding:.8em;overflow:auto;max-height:70vh;white-space:pre-wrap}
.filters a{margin-right:.6em}
.logs a{margin-right:.4em;white-space:nowrap}
.pailer-bar{display:flex;gap:1em;align-items:center;flex-wrap:wrap}
#pailer-status{color:#555;font-size:.9em}
ul.roles{list-style:none;padding-left:1.2em;margin:.2em 0}ul.roles>li{margin:.15em 0}
ul.roles .role-name{font-weight:600}ul.roles .implicit{color:#777;font-style:italic}
form.operator-call{display:inline;margin:0}form.operator-call .result{color:#a00;margin-left:.5em}
"""

# Optional behaviour, the pages work without it (the pailer and the maintenance buttons need it):
# - an auto-refresh toggle (remembered per browser);
# - the pailer, an in-browser ``tail -f``: while "follow" is ticked, ask the master's ``read``
#   route (which asks the task's agent ``/files/read``) for what the file grew by from the last
#   offset, append it as text (never as markup), and ask again at once while a whole chunk came;
# - maintenance buttons: a form with ``data-call`` (DRAIN_AGENT / REACTIVATE_AGENT) and
#   ``data-agent`` POSTs that operator call as JSON to ``/api/v1`` (with the form's ``reason``
#   if one was typed), then reloads the page.
SCRIPT = """
(function(){
var box=document.getElementById('autorefresh');
if(box){box.checked=localStorage.getItem('agora-autorefresh')==='1';
box.addEventListener('change',function(){localStorage.setItem('agora-autorefresh',box.checked?'1':'0');});
setInterval(function(){if(box.checked&&!document.getElementById('log'))location.reload();},5000);}
var log=document.getElementById('log'),follow=document.getElementById('follow'),
status=document.getElementById('pailer-status');
if(log&&log.dataset.src&&follow){follow.disabled=false;var busy=false;
var say=function(t){if(status)status.textContent=t;};
var poll=function(){if(busy||!follow.checked)return;busy=true;var off=log.dataset.offset;
fetch(log.dataset.src+'&offset='+off,{cache:'no-store'}).then(function(r){
return r.json().then(function(d){if(!r.ok)throw new Error(d.error||('HTTP '+r.status));return d;});
}).then(function(d){busy=false;var more=false;if(d.data){
var end=log.scrollTop+log.clientHeight>=log.scrollHeight-8;
log.appendChild(document.createTextNode(d.data));log.dataset.offset=String(d.next_offset);
if(end)log.scrollTop=log.scrollHeight;more=d.next_offset-d.offset>=parseInt(log.dataset.chunk||'0',10);}
say('following: '+log.dataset.offset+' bytes');if(more)poll();
}).catch(function(e){busy=false;say('not following: '+e.message);});};
follow.addEventListener('change',function(){say(follow.checked?'following':'paused');poll();});
say('following: '+log.dataset.offset+' bytes');setInterval(poll,1000);}
var forms=document.querySelectorAll('form.operator-call');
for(var i=0;i<forms.length;i++){(function(f){f.addEventListener('submit',function(ev){ev.preventDefault();
var call=f.dataset.call,body={type:call},out=f.querySelector('.result');
body[call.toLowerCase()]={agent_id:{value:f.dataset.agent}};
var why=f.querySelector('input[name=reason]');if(why&&why.value)body[call.toLowerCase()].reason=why.value;
fetch('/api/v1',{method:'POST',headers:{'Content-Type':'application/json'},body:JSON.stringify(body)})
.then(function(r){if(r.ok){location.reload();return;}
return r.text().then(function(t){if(out)out.textContent='HTTP '+r.status+': '+t;});})
.catch(function(e){if(out)out.textContent=String(e);});});})(forms[i]);}
})();
"""


def page(title: str, body: object, *, subtitle: object = "") -> Html:
    nav = join(link(href, text) for href, text in NAV)
    toggle = tag("label", Html('<input type="checkbox" id="autorefresh"> '), "auto-refresh")
    return Html(
        "<!DOCTYPE html>\n"
        + tag(
            "html",
            tag(
                "head",
                Html('<meta charset="utf-8">'),
                Html('<meta name="viewport" content="width=device-width, initial-scale=1">'),
                tag("title", f"{title} - Agora master"),
                tag("style", Html(STYLE)),
            ),
            tag(
                "body",
                tag("header", tag("span", "Agora", cls="brand"), nav, toggle),
                tag("main", tag("h1", title), subtitle, body),
                tag("script", Html(SCRIPT)),
            ),
            lang="en",
        )
    )


def error_page(status: int, title: str, message: str) -> Html:
    return page(title, tag("p", message, cls="error"), subtitle=tag("p", f"HTTP {status}", cls="note"))
