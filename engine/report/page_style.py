"""The report page's stylesheet (inlined into the HTML: nothing is fetched at view time)."""

CSS = """
:root { --kg:#1f77b4; --wiki:#2ca02c; --web:#ff7f0e; --domain:#9467bd; --right:#1a7f37;
        --wrong:#cf222e; --muted:#57606a; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 24px 40px;
       color: #1f2328; }
h1 { font-size: 22px; margin: 18px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
.sub { color: var(--muted); margin: 0 0 12px; }
table { border-collapse: collapse; }
table.metrics td, table.metrics th { border-bottom: 1px solid #d0d7de; padding: 3px 8px;
       text-align: right; white-space: nowrap; }
table.metrics td:nth-child(-n+2), table.metrics th:nth-child(-n+2) { text-align: left; }
.problems { color: #9a6700; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
svg.plot { border: 1px solid #d0d7de; background: #fff; }
.pt { font-weight: 600; text-anchor: middle; font-size: 13px; }
.pf { fill: none; stroke: #8c959f; } .pg { stroke: #eaeef2; }
.py { text-anchor: end; font-size: 11px; fill: #1f2328; }
.px { text-anchor: middle; font-size: 11px; } .pl { text-anchor: middle; font-size: 12px; fill: var(--muted); }
.pv { font-size: 11px; } .pm { stroke: #fff; stroke-width: 1; }
.legend { margin: 6px 0; } .lg { margin-right: 14px; white-space: nowrap; }
.lg i { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }
.filters { display: flex; flex-wrap: wrap; gap: 10px; align-items: end; margin-bottom: 8px;
           position: sticky; top: 0; background: #fff; padding: 6px 0; z-index: 2; }
.filters label { display: flex; flex-direction: column; font-size: 12px; color: var(--muted); }
.filters select, .filters input { font-size: 14px; padding: 2px 4px; }
table.questions { width: 100%; }
table.questions td, table.questions th { border-bottom: 1px solid #eaeef2; padding: 4px 6px;
       vertical-align: top; text-align: left; }
tr.qrow { cursor: pointer; } tr.qrow:hover { background: #f6f8fa; }
.ok1 { color: var(--right); } .ok0 { color: var(--wrong); } .oke { color: #9a6700; }
.none { color: #8c959f; font-style: italic; }
.detail > td { background: #f6f8fa; }
.card { background: #fff; border: 1px solid #d0d7de; border-radius: 6px; padding: 8px 12px;
        margin: 8px 0; }
.card h3 { font-size: 15px; margin: 0 0 6px; }
.calls td, .calls th { padding: 1px 8px; border-bottom: 1px solid #eaeef2; font-size: 12px; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f8fa; padding: 6px;
      margin: 4px 0; max-height: 360px; overflow: auto; font-size: 12px; }
details > summary { cursor: pointer; }
.chunks li { margin: 3px 0; } .chunks code { color: var(--muted); }
.model-text { margin-left: 18px; font-style: italic; color: var(--muted); }
.model-label { font-style: normal; font-size: 11px; border: 1px solid var(--muted); border-radius: 8px;
               padding: 0 5px; }
.src { display: inline-block; padding: 0 5px; border-radius: 8px; color: #fff; font-size: 11px; }
.src-kg { background: var(--kg); } .src-wiki { background: var(--wiki); }
.src-web { background: var(--web); } .src-domain { background: var(--domain); }
svg.evgraph { border: 1px solid #d0d7de; background: #fff; max-width: 100%; height: auto; }
svg.evgraph text { font-size: 11px; }
.pager { margin: 8px 0; } .pager button { margin-right: 6px; }
#status { color: var(--muted); }
"""
