package grammar_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/loomlm/loom/constraint/grammar"
)

// TestCache: the same parts give the kept grammar without building; other parts (even the
// same bytes split otherwise) build anew; an error is not kept; the oldest goes first.
func TestCache(t *testing.T) {
	c := grammar.NewCache(2)
	builds := 0
	build := func(src string) func() (*grammar.CFG, error) {
		return func() (*grammar.CFG, error) {
			builds++
			return grammar.MustCompile(src), nil
		}
	}
	a, _ := c.Get(build(`root ::= "a"`), []byte("gbnf"), []byte(`root ::= "a"`))
	a2, _ := c.Get(build(`root ::= "a"`), []byte("gbnf"), []byte(`root ::= "a"`))
	if a != a2 || builds != 1 {
		t.Fatalf("the same parts: %d builds, same grammar %v", builds, a == a2)
	}
	if b, _ := c.Get(build(`root ::= "a"`), []byte("gbn"), []byte(`froot ::= "a"`)); b == a || builds != 2 {
		t.Fatalf("parts split otherwise share a grammar (%d builds)", builds)
	}
	failed := errors.New("no")
	for range 2 {
		if _, err := c.Get(func() (*grammar.CFG, error) { builds++; return nil, failed }, []byte("bad")); err != failed {
			t.Fatalf("error %v", err)
		}
	}
	if builds != 4 {
		t.Fatalf("an error was kept: %d builds", builds)
	}
	for i := range 2 { // two more evict "a"
		c.Get(build(fmt.Sprintf(`root ::= "%d"`, i)), []byte(fmt.Sprint(i)))
	}
	if a3, _ := c.Get(build(`root ::= "a"`), []byte("gbnf"), []byte(`root ::= "a"`)); a3 == a || builds != 7 {
		t.Fatalf("after two newer grammars in a cache of 2: %d builds, the old grammar %v", builds, a3 == a)
	}
}
