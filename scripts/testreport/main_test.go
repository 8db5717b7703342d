package main

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// stream encodes events as `go test -json` writes them.
func stream(t *testing.T, events ...event) string {
	t.Helper()
	var b strings.Builder
	for _, e := range events {
		line, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

const pkg = "example.com/p"

func out(test, text string) event {
	return event{Action: "output", Package: pkg, Test: test, Output: text}
}

var (
	passing = []event{
		{Action: "run", Package: pkg, Test: "TestA"},
		out("TestA", "=== RUN   TestA\n"),
		out("TestA", "    a_test.go:3: a log line of a passing test\n"),
		out("TestA", "--- PASS: TestA (0.00s)\n"),
		{Action: "pass", Package: pkg, Test: "TestA"},
	}
	failing = []event{
		{Action: "run", Package: pkg, Test: "TestB"},
		out("TestB", "=== RUN   TestB\n"),
		out("TestB", "    b_test.go:9: got 2, want 3\n"),
		out("TestB", "--- FAIL: TestB (0.00s)\n"),
		{Action: "fail", Package: pkg, Test: "TestB"},
	}
	skipping = []event{
		{Action: "run", Package: pkg, Test: "TestC/sub"},
		out("TestC/sub", "=== RUN   TestC/sub\n"),
		out("TestC/sub", "    c_test.go:5: no assembly kernels on this CPU or build\n"),
		out("TestC/sub", "--- SKIP: TestC/sub (0.00s)\n"),
		{Action: "skip", Package: pkg, Test: "TestC/sub"},
	}
	noFiles = []event{
		out("", "?   \texample.com/q\t[no test files]\n"),
		{Action: "skip", Package: "example.com/q"},
	}
)

func end(action string) []event {
	text := "ok  \t" + pkg + "\t0.1s\n"
	if action == "fail" {
		text = "FAIL\t" + pkg + "\t0.1s\n"
	}
	return []event{out("", text), {Action: action, Package: pkg}}
}

func TestReport(t *testing.T) {
	allowKernels := allowList{regexp.MustCompile(`no assembly kernels`)}
	cat := func(parts ...[]event) []event {
		var all []event
		for _, p := range parts {
			all = append(all, p...)
		}
		return all
	}
	for _, tc := range []struct {
		name    string
		events  []event
		allow   allowList
		ok      bool
		want    []string
		notWant []string
	}{
		{"passing", cat(passing, noFiles, end("pass")), nil, true,
			[]string{"ok  \texample.com/p", "?   \texample.com/q\t[no test files]"}, []string{"a log line", "skipped"}},
		{"failing", cat(passing, failing, end("fail")), nil, false,
			[]string{"b_test.go:9: got 2, want 3", "--- FAIL: TestB", "FAIL\texample.com/p"}, []string{"a log line"}},
		{"skip not allowed", cat(passing, skipping, end("pass")), nil, false,
			[]string{"1 skipped:", "NOT ALLOWED example.com/p.TestC/sub: c_test.go:5: no assembly kernels on this CPU or build", "FAIL: 1 tests skipped"}, nil},
		{"skip allowed", cat(passing, skipping, end("pass")), allowKernels, true,
			[]string{"allowed     example.com/p.TestC/sub: c_test.go:5: no assembly kernels"}, []string{"NOT ALLOWED", "FAIL"}},
		{"crash", cat(passing, []event{
			{Action: "run", Package: pkg, Test: "TestD"},
			out("TestD", "=== RUN   TestD\n"),
			out("TestD", "panic: runtime error: index out of range [1] with length 1\n"),
			out("TestD", "goroutine 20 [running]:\n"),
		}, end("fail")), nil, false,
			[]string{"panic: runtime error: index out of range", "goroutine 20 [running]:", "FAIL\texample.com/p"}, []string{"a log line"}},
		{"build failure", []event{
			{Action: "build-output", ImportPath: pkg, Output: "# example.com/p\n"},
			{Action: "build-output", ImportPath: pkg, Output: "p.go:3:1: syntax error\n"},
			{Action: "build-fail", ImportPath: pkg},
			out("", "FAIL\texample.com/p [build failed]\n"),
			{Action: "fail", Package: pkg},
		}, nil, false, []string{"p.go:3:1: syntax error", "FAIL\texample.com/p [build failed]"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var w bytes.Buffer
			ok := report(strings.NewReader(stream(t, tc.events...)), &w, tc.allow)
			if ok != tc.ok {
				t.Errorf("report = %v, want %v; output:\n%s", ok, tc.ok, w.String())
			}
			for _, s := range tc.want {
				if !strings.Contains(w.String(), s) {
					t.Errorf("output lacks %q:\n%s", s, w.String())
				}
			}
			for _, s := range tc.notWant {
				if strings.Contains(w.String(), s) {
					t.Errorf("output has %q:\n%s", s, w.String())
				}
			}
		})
	}
}

func TestBadAllowExpression(t *testing.T) {
	var a allowList
	if err := a.Set("(unclosed"); err == nil {
		t.Fatal("an invalid -allow-skip expression was accepted")
	}
}
