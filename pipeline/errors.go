package pipeline

import (
	"fmt"
	"sort"
	"strings"
)

// Error is one problem in a pipeline file, with where it is: a line of the file, or the
// command-line flag (an override) that set the value.
type Error struct {
	File string
	Line int    // 0 when unknown
	Col  int    // 0 when unknown or not given
	Path string // field path, e.g. "processors[2].p"
	Msg  string
	// Flag, when set, is the override that caused the error ("--top-p"); the error then reads
	// "--n 0: must be in [1, 1024]" and names no file.
	Flag string
}

func (e *Error) Error() string {
	if e.Flag != "" {
		return e.Flag + e.Msg
	}
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Col > 0 {
			fmt.Fprintf(&b, ":%d", e.Col)
		}
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
	// flags maps the field paths that command-line overrides set to the flag's name.
	flags map[string]string
}

// add records an error at a field path. An error on a field set by a flag names the flag: a
// message " = v: reason" becomes "--flag v: reason".
func (l *errList) add(path, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if flag, ok := l.flags[path]; ok {
		switch {
		case strings.HasPrefix(msg, " = "):
			msg = " " + strings.TrimPrefix(msg, " = ")
		case !strings.HasPrefix(msg, ":"):
			msg = ": " + msg
		}
		l.errs = append(l.errs, &Error{Flag: flag, Path: path, Msg: msg})
		return
	}
	l.errs = append(l.errs, &Error{File: l.file, Line: l.loc.line(path), Path: path, Msg: msg})
}

// addIn records an error at a line and column inside the string value of a field path (an
// inline grammar's or schema's): placed at that point of the file where the value's text can
// be found there, else at the field with the position in the message.
func (l *errList) addIn(path string, line, col int, msg string) {
	_, flagged := l.flags[path]
	start, ok := l.loc.value(path)
	if flagged || !ok {
		l.add(path, "%d:%d: %s", line, col, msg)
		return
	}
	p := position{start.line + line - 1, col}
	if line == 1 {
		p.col += start.col - 1
	}
	l.errs = append(l.errs, &Error{File: l.file, Line: p.line, Col: p.col, Path: path, Msg: msg})
}

// addFlag records an error of a flag's value: "--n 0: must be in [1, 1024]".
func (l *errList) addFlag(flag string, value any, reason string) {
	l.errs = append(l.errs, &Error{Flag: flag, Msg: fmt.Sprintf(" %v: %s", value, reason)})
}

// sort orders the errors by line, flag errors and errors without a line first.
func (l *errList) sort() {
	sort.SliceStable(l.errs, func(i, j int) bool { return l.errs[i].Line < l.errs[j].Line })
}

func (l *errList) err() error {
	if len(l.errs) == 0 {
		return nil
	}
	return l.errs
}
