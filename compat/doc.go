// Package compat holds the restart-compatibility rules of a streaming query: which changes a
// checkpoint survives.
//
// A checkpoint is only meaningful for the query that wrote it. Its offsets are keyed by
// source name and mean something only for the same topic set, folder or table; its state is
// keyed by each stateful step's id and encoded by that step's keys, functions and window.
// Package compat records what the checkpoint depends on, and judges a changed spec against
// it before the change is applied.
//
//   - [Shape] is that record: per named source its kind and identity, per stateful step its
//     keys (names, types, order), aggregate functions and inputs, window, and the watermark;
//     the output mode, the sink's kind and identity, pinned settings and the trigger.
//     [ShapeOf] computes it from a spec. The engine stores it as JSON in the checkpoint's
//     shape/<N> log, at the first batch and whenever a run starts with a different but
//     compatible shape (replacing an entry no batch ran under); [ParseShape] reads it back.
//     A change is judged against the shape the committed batches ran under.
//   - [Check] compares an old Shape with a new spec and returns a [Verdict]: one [Finding] per
//     change that matters, each allowed, allowed with a warning, or rejected, with the rule,
//     the spec path, the old and new values, a one-sentence reason and the remedy. The verdict
//     also states the new query's delivery guarantee and why ([GuaranteeOf]). With no
//     checkpoint yet only the rules that judge the new spec alone run ([Rule].Fresh), so
//     that a query whose state would grow without bound is warned about before its first run.
//   - [Rules] is the one table of rules, a chain of small checks run in order. The page
//     docs/compatibility.md is generated from it (go generate ./compat). A rule that only
//     says "this field changed" is data, a fieldRule (rule_field.go): which parts it pairs
//     (the sources, the sink, a step's keys or aggregates, the joins, the settings), when
//     it applies, the field compared, the severity and the text of its finding, all
//     evaluated by one loop. Rules with more logic than that are small functions.
//   - [Judge] is the one judge: a pure function of what a caller gathered about the
//     checkpoint ([Facts]: the committed shape, read by [ReadShape], or the files of a Spark
//     checkpoint Lockstep did not write) and the new spec. It picks what to judge against
//     (Lockstep's shape, else the shape inferred from Spark's files with [ShapeOfSpark], else
//     nothing: a fresh start), runs [Check], and returns a [Judgement]: the verdict, how the
//     shape was inferred, and the new shape to record. Gathering stays with each caller;
//     [Judgement.Err] is the [*RejectedError] the runtimes' start guards stop on.
//     [Verdict.WriteText] renders a verdict for people; `lockstep plan`, `lockstep run` and
//     the engine all print it the same way.
//
// The same Judge runs in `lockstep plan`, the admission webhook and the reconciler (so the
// Terraform plan, through a server-side dry run), the built-in engine at start and the spark
// runtime before it adopts a Spark checkpoint. Package compat does no I/O but ReadShape's
// reads of a checkpoint it is handed: it imports the API types and, from package checkpoint,
// the one location parser (file:///a/b and /a/b/ compare equal everywhere) and the readers of
// Lockstep's and Spark's checkpoint files.
package compat

//go:generate go run ./internal/gendocs -o ../docs/compatibility.md
