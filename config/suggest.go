package config

import (
	"fmt"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// suggestKey answers an unknown key with the known key nearest to it: hint is the text for
// the error, near that key, and close whether it is near enough to be the intended key (a
// typo, a case or '-' slip, a plural). When nothing is close, the hint lists every key
// allowed at that place, since a guess alone would mislead.
func suggestKey(got string, fields map[string]int) (hint, near string, sure bool) {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	if len(names) == 0 {
		return "", "", false
	}
	sort.Strings(names) // ties go to the first name, the same on every run
	g := normKey(got)
	best := -1
	for _, name := range names {
		dist := editDistance(g, normKey(name))
		if best < 0 || dist < best {
			best, near = dist, name
		}
	}
	// Two edits, or a quarter of a long name: beyond that the nearest key is a guess.
	sure = best <= max(2, len(near)/4) && best < len(near)
	if sure {
		return fmt.Sprintf(" (did you mean %q?)", near), near, true
	}
	return fmt.Sprintf(" (did you mean %q? the keys here are %s)", near, strings.Join(names, ", ")), near, false
}

// normKey folds the slips that are no typo at all: case, '-' for '_', a plural 's'.
func normKey(s string) string {
	return strings.TrimSuffix(strings.ReplaceAll(strings.ToLower(s), "-", "_"), "s")
}

// maxKeyCompare bounds editDistance's work: a key longer than this in a hostile file is
// compared by its first bytes only.
const maxKeyCompare = 64

// editDistance counts the insertions, deletions, substitutions and swaps of two neighbours
// that turn a into b (optimal string alignment).
func editDistance(a, b string) int {
	a, b = a[:min(len(a), maxKeyCompare)], b[:min(len(b), maxKeyCompare)]
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// hasKey reports whether the mapping n sets key.
func hasKey(n *yaml.Node, key string) bool {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && unmaskRefs(k.Value) == key {
			return true
		}
	}
	return false
}

// quoted reports whether a scalar was written as text: in quotes, as a block, or tagged !!str.
func quoted(n *yaml.Node) bool {
	if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle|yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
		return true
	}
	return n.Style&yaml.TaggedStyle != 0 && n.ShortTag() == "!!str"
}
