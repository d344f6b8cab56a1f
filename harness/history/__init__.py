"""`harness history`: every report's figures kept by commit in a small SQLite store, change
points found in each series, pictures and a static HTML page (docs/HISTORY.md).

Stages, data flowing one way: points (a report.json read into rows) -> store (SQLite) ->
changes (change points of a series) -> plots / page (pictures, HTML) -> cli, hook."""
