"""`harness history`: every report's figures kept by commit in a small SQLite store, change
points found in each series, pictures and a static HTML page (docs/HISTORY.md).

Stages, data flowing one way: points, gitlog, commits (reports read into rows; commit times) ->
store (SQLite) -> changes (change points of a series) -> plots / page (pictures, HTML) -> cli,
hook (what verify calls)."""
