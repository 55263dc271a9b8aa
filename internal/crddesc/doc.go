// Package crddesc folds the descriptions of the CustomResourceDefinitions controller-gen
// writes, so that `kubectl explain` shows them as flowing text.
//
// controller-gen takes each description from a Go doc comment in api/v1 and keeps its line
// breaks: it writes the description as a YAML literal block (`description: |-`), and the API
// server serves the text with a break every ~100 columns, where the comment was wrapped.
// `kubectl explain` wraps text to the terminal itself, so those breaks show as ragged, hard-
// wrapped lines. Fold turns each such block into a folded block (`description: >-`), the YAML
// style whose single line breaks read as spaces: the text is the comment's, its paragraphs
// (blank lines) and more-indented lines (code) keep their breaks, and nothing else in the
// manifest changes. `make generate` runs it (hack/crddesc) on config/crd/bases, of which the
// chart and the provider hold copies; internal/generated checks that the files are current.
package crddesc
