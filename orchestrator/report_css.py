"""The report's stylesheet, shared by the report and the run pages (one source for both)."""

CSS = """
body{font-family:sans-serif;margin:2em;color:#222;max-width:1200px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
h1,h2,p{overflow-wrap:anywhere}
nav{font-size:.9em;line-height:1.6}nav a{white-space:nowrap;margin-right:.8em}
.wide{max-width:100%;max-height:80vh;overflow:auto;margin:1em 0;
 background:linear-gradient(to left,#fff 40%,rgba(255,255,255,0)) right/3em 100% no-repeat local,
 radial-gradient(farthest-side at 100% 50%,rgba(0,0,0,.25),rgba(0,0,0,0)) right/1em 100% no-repeat scroll}
table{border-collapse:separate;border-spacing:0;font-size:.9em}
th,td{border:solid #ddd;border-width:0 1px 1px 0;padding:3px 6px;text-align:right;vertical-align:top}
th{border-top-width:1px;background:#f4f4f4;position:sticky;top:0;z-index:1;vertical-align:bottom;
 font-weight:600;min-width:2.5em}
th:first-child,td:first-child{border-left-width:1px}
td:first-child{position:sticky;left:0;background:#fff}
th:first-child{left:0;z-index:2}
.l{text-align:left;overflow-wrap:break-word;min-width:6em}
.pm{white-space:nowrap;color:#555}
.note{color:#555;font-size:.9em}svg.chart{display:block;margin:.5em 0;max-width:100%;height:auto}
details{margin:.5em 0 1em}summary{cursor:pointer;color:#333}
.empty{border:1px solid #ccc;background:#fafafa;padding:.5em 1.5em 1em;max-width:60em}.empty h2{margin-top:.5em}
.empty code{white-space:nowrap}.empty pre code{white-space:pre}
pre{background:#f4f4f4;padding:.8em 1em;overflow-x:auto;line-height:1.5}.comment{color:#666}
code{font-family:monospace;font-size:.95em}
@media print{.wide{max-height:none;overflow:visible}}
"""
