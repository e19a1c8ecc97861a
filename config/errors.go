package config

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a config file. It names the place so that `modelgate check`
// output can be acted on without reading the loader.
type Error struct {
	File string // as given to Load or Parse
	Line int    // 1-based; 0 when the problem has no single place in the file
	Path string // key path such as teams[0].keys[1].key; "" for the file as a whole
	Msg  string
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
