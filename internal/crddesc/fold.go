package crddesc

import "regexp"

// literalDescription matches the key of a description written as a literal block, with the
// block's indentation and chomping indicators.
var literalDescription = regexp.MustCompile(`(?m)^(\s*(?:- )?description: )\|([0-9]?[-+]?)$`)

// Fold returns the CRD manifest with every description written as a literal block written as a
// folded block instead: the same lines, whose single line breaks now read as spaces.
func Fold(manifest []byte) []byte {
	return literalDescription.ReplaceAll(manifest, []byte("${1}>${2}"))
}
