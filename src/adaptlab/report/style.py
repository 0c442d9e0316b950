"""The report's stylesheet, inlined into the page (no external CSS or fonts)."""

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 0;
  color: #1d2329; background: #fff; line-height: 1.45; }
main { max-width: 1000px; margin: 0 auto; padding: 1.5rem 1.5rem 3rem; }
h1 { font-size: 1.6rem; margin: 0 0 .3rem; }
h2 { font-size: 1.25rem; margin: 2.2rem 0 .6rem; border-bottom: 1px solid #d8dde3;
  padding-bottom: .25rem; }
h3 { font-size: 1.02rem; margin: 1.4rem 0 .4rem; }
.lead { color: #4b5661; margin: 0 0 1rem; }
.judged { margin: 0 0 .4rem; font-weight: 600; }
.imbalance { margin: .2rem 0 .6rem; }
.wide { overflow-x: auto; }
tr.never td { color: #a3282f; }
.note { color: #6b7580; font-style: italic; }
.verdicts li { margin: .35rem 0; }
table { border-collapse: collapse; margin: .4rem 0 1rem; font-size: .9rem; }
th, td { padding: .28rem .65rem; border-bottom: 1px solid #e4e8ec; text-align: right; }
td { white-space: nowrap; }
th:first-child, td:first-child { text-align: left; white-space: normal; }
th { background: #f3f5f7; font-weight: 600; }
tr.best td { background: #eaf6ec; font-weight: 600; }
.generations td { white-space: pre-wrap; text-align: left; vertical-align: top;
  overflow-wrap: anywhere; }
figure { margin: .6rem 0 1.2rem; }
figure img { display: block; width: 100%; max-width: 900px; height: auto; }
figcaption { color: #4b5661; font-size: .85rem; }
footer { margin-top: 3rem; padding-top: .8rem; border-top: 1px solid #d8dde3;
  color: #4b5661; font-size: .85rem; }
footer dl { display: grid; grid-template-columns: max-content 1fr; gap: .15rem 1rem; margin: 0; }
footer dt { font-weight: 600; }
footer dd { margin: 0; }
"""
