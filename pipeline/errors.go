package pipeline

import (
	"fmt"
	"strings"
)

// Error is one problem in a pipeline file, with where it is.
type Error struct {
	File string
	Line int    // 0 when unknown
	Path string // field path, e.g. "processors[2].p"
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
		if !strings.HasPrefix(e.Msg, " = ") && !strings.HasPrefix(e.Msg, ":") {
			b.WriteString(": ")
		}
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in a pipeline file, in file order.
type Errors []*Error

func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// errList collects errors for one file.
type errList struct {
	file string
	loc  *locator
	errs Errors
}

func (l *errList) add(path, format string, args ...any) {
	l.errs = append(l.errs, &Error{File: l.file, Line: l.loc.line(path), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (l *errList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return l.errs
}
