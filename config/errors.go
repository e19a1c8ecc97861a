package config

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Error is one problem in a config file. It names the place so that `modelgate check`
// output can be acted on without reading the loader.
type Error struct {
	File string // as given to Load or Parse
	Line int    // 1-based; 0 when the problem has no single place in the file
	Path string // key path such as teams[0].keys[1].key; "" for the file as a whole
	Msg  string
	// Vars are the unset environment variables this error names, for a caller that can
	// offer a way around them (check --simulate).
	Vars []string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// maxReported bounds the error list: a badly broken file should not produce pages of output.
const maxReported = 20

// joinErrors orders problems by line so the output reads top to bottom like the file.
func joinErrors(errs []*Error) error {
	if len(errs) == 0 {
		return nil
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Line < errs[j].Line })
	extra := 0
	if len(errs) > maxReported {
		extra = len(errs) - maxReported
		errs = errs[:maxReported]
	}
	out := make([]error, 0, len(errs)+1)
	for _, e := range errs {
		out = append(out, e)
	}
	if extra > 0 {
		out = append(out, fmt.Errorf("%s: %d more problems not shown", errs[0].File, extra))
	}
	return errors.Join(out...)
}

// reportUnset adds the one error naming every unset environment variable, each with the
// lines that reference it. A single reference keeps its key path, as any other error does.
func (d *decoder) reportUnset() {
	if len(d.unset) == 0 {
		return
	}
	first := d.unsetLines[d.unset[0]][0]
	if len(d.unset) == 1 && len(d.unsetLines[d.unset[0]]) == 1 {
		name := d.unset[0]
		path := ""
		for p, vars := range d.unsetPaths {
			if slices.Contains(vars, name) {
				path = p
			}
		}
		d.errs = append(d.errs, &Error{File: d.file, Line: first, Path: path, Vars: []string{name},
			Msg: fmt.Sprintf("environment variable %s is not set", name)})
		return
	}
	parts := make([]string, len(d.unset))
	for i, name := range d.unset {
		lines := d.unsetLines[name]
		word := "line"
		if len(lines) > 1 {
			word = "lines"
		}
		nums := make([]string, len(lines))
		for j, l := range lines {
			nums[j] = strconv.Itoa(l)
		}
		parts[i] = fmt.Sprintf("%s (%s %s)", name, word, strings.Join(nums, ", "))
	}
	msg := "environment variables are not set: " + strings.Join(parts, ", ")
	if len(d.unset) == 1 {
		msg = "environment variable " + parts[0] + " is not set"
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: first, Vars: slices.Clone(d.unset), Msg: msg})
}

// relevant drops the validation errors the decoding errors already explain: those about a
// path that failed to decode or about a key under one, and those whose message names one
// ("set upstream.api_key or ..." when upstream.api_key named an unset variable). An error
// about an ancestor stays: a team's own problem is not its key's.
func (d *decoder) relevant(errs []*Error) []*Error {
	if len(d.failed) == 0 {
		return errs
	}
	out := errs[:0]
	for _, e := range errs {
		if !d.explained(e) {
			out = append(out, e)
		}
	}
	return out
}

func (d *decoder) explained(e *Error) bool {
	for p := e.Path; p != ""; p = parentPath(p) {
		if d.failed[p] {
			return true
		}
	}
	// Each word of the message that could be a key path is looked up: linear in the
	// message, however many paths failed.
	for _, w := range strings.FieldsFunc(e.Msg, func(r rune) bool { return !isPathRune(r) }) {
		w = strings.TrimRight(w, ".")
		if strings.ContainsAny(w, ".[") && d.failed[w] {
			return true
		}
	}
	return false
}

func isPathRune(r rune) bool {
	return r == '_' || r == '.' || r == '[' || r == ']' || r == '-' ||
		'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
}

// parentPath is the path one level up: "a.b[2]" for "a.b[2].c", "a.b" for "a.b[2]".
func parentPath(p string) string {
	i := strings.LastIndexAny(p, ".[")
	if i < 0 {
		return ""
	}
	return p[:i]
}
