// Package ui serves a query's page: who it is, its delivery guarantee and
// shape, charts of its last batches (input rate against processing rate,
// batch duration by phase, source lag, state rows, watermark), a table of
// recent batches, the current trigger and the last error.
//
// A Ring keeps the recent progress in memory. It is an engine.Observer for a
// running query (`lockstep run --http`, the engine's port), or is filled from a
// checkpoint's commit log for a stopped one (`lockstep ui`). Handler serves
// the page at /, the ring as JSON at /api/progress, and the page's stylesheet
// and script under /assets/. The page is rendered on the server, its charts
// are inline SVG, and its assets are embedded in the binary: there is no build
// step and nothing is fetched from elsewhere. While the query runs, a small
// script reloads the page's content every two seconds.
package ui
