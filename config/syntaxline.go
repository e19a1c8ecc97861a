package config

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// syntaxError rewrites yaml's "yaml: line N: msg" into the file:line form used everywhere
// else, at the line the problem is really on. yaml.v3 names the line where the enclosing
// block began ("while parsing a block mapping" at line 12), not the line that broke it (a key
// indented one space too far on line 37); data (as parsed) lets the real line be found.
func syntaxError(err error, source string, data []byte) error {
	m := yamlLineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return &Error{File: source, Msg: "YAML syntax: " + err.Error()}
	}
	// The reported line is only a lower bound (it is not even the block's first line), so it
	// is not repeated in the message.
	reported, _ := strconv.Atoi(m[1])
	return &Error{File: source, Line: problemLine(data, reported, m[2]), Msg: "YAML syntax: " + m[2]}
}

// maxSearchBytes bounds the files problemLine searches: yaml.v3 parses about 2 MB a second
// and the search parses up to seventeen prefixes, so a file of this size costs well under a
// second (a 4 MiB one took 48 s). A real config is a few kilobytes; a larger file keeps the
// line yaml.v3 names.
const maxSearchBytes = 128 << 10

// problemLine finds the first line at which the document fails with problem. YAML closes
// every open block at the end of the input, so the document cut off before the bad line
// parses, and cut off after it fails with the same problem: a binary search over where to
// cut, from the reported line on, finds the bad line in a few parses whatever the size of the
// file. A cut inside a quoted string or a [...] fails with another problem, which counts as
// parsing. If the search finds nothing better it answers the reported line.
func problemLine(data []byte, reported int, problem string) int {
	if len(data) > maxSearchBytes || !onlyNewlines(data) {
		return reported
	}
	ends := lineEnds(data)
	if reported < 1 || reported >= len(ends) {
		return reported
	}
	fails := func(n int) bool {
		var doc yaml.Node
		err := yaml.NewDecoder(bytes.NewReader(data[:ends[n-1]])).Decode(&doc)
		if err == nil || errors.Is(err, io.EOF) {
			return false
		}
		m := yamlLineRE.FindStringSubmatch(err.Error())
		return m != nil && m[2] == problem
	}
	lo, hi := reported-1, len(ends) // the cut after lo lines parses, the whole file fails
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if fails(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	if hi == len(ends) && !fails(hi) {
		return reported
	}
	return hi
}

// lineEnds holds, for each line of data, the offset just past it (its newline included).
func lineEnds(data []byte) []int {
	var ends []int
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			ends = append(ends, len(data))
			break
		}
		off += i + 1
		ends = append(ends, off)
	}
	return ends
}

// onlyNewlines reports whether data breaks lines with "\n" (or "\r\n") alone. yaml.v3 also
// counts a lone "\r", NEL, LS and PS as line breaks; in a file that has them its line numbers
// and lineEnds' would disagree, so the search is not attempted.
func onlyNewlines(data []byte) bool {
	for i, c := range data {
		if c == '\r' && (i+1 == len(data) || data[i+1] != '\n') {
			return false
		}
	}
	return !bytes.Contains(data, []byte("\u0085")) && !bytes.Contains(data, []byte("\u2028")) && !bytes.Contains(data, []byte("\u2029"))
}
