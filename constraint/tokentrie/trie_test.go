package tokentrie_test

import (
	"bytes"
	"github.com/loomlm/loom/testmodel"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/loomlm/loom/constraint/tokentrie"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/llama3vocab"
	"github.com/loomlm/loom/model/llama"
	"github.com/loomlm/loom/models"
)

// prefixRecognizer accepts exactly the prefixes of a set of byte strings (at most one byte
// past the state is needed), a recogniser independent of the Earley parser.
type prefixRecognizer struct {
	words [][]byte
	buf   []byte
}

// embeddedTokenizer returns the embedded default model's tokenizer, the model closed when the
// test ends.
func embeddedTokenizer(t *testing.T) core.Tokenizer {
	t.Helper()
	m, tok, err := models.Open("default", llama.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return tok
}

func (r *prefixRecognizer) ok(next []byte) bool {
	for _, w := range r.words {
		if bytes.HasPrefix(w, next) {
			return true
		}
	}
	return false
}

func (r *prefixRecognizer) CanAdvance(b byte) bool {
	return r.ok(append(r.buf[:len(r.buf):len(r.buf)], b))
}

func (r *prefixRecognizer) Advance(b byte) bool {
	if !r.CanAdvance(b) {
		return false
	}
	r.buf = append(r.buf, b)
	return true
}

func (r *prefixRecognizer) Pop(n int) { r.buf = r.buf[:len(r.buf)-n] }

// TestFillAgainstPrefixes fills masks of the embedded vocabulary with a recogniser of the
// prefixes of a few words and checks every token: it is in the mask exactly when its bytes
// are a prefix of one of the words.
func TestFillAgainstPrefixes(t *testing.T) {
	tok := embeddedTokenizer(t)
	trie := tokentrie.New(tok)
	if trie.VocabSize() != tok.VocabSize() || trie.Nodes() < 2 {
		t.Fatalf("trie of %d tokens has %d nodes", trie.VocabSize(), trie.Nodes())
	}
	for _, words := range [][]string{
		{" the LORD", " thee", " and"},
		{"In the beginning", "\n"},
		{"zzzz"},
	} {
		r := &prefixRecognizer{}
		for _, w := range words {
			r.words = append(r.words, []byte(w))
		}
		mask := tokentrie.NewMask(tok.VocabSize())
		trie.Fill(r, mask)
		if len(r.buf) != 0 {
			t.Fatalf("Fill left %d bytes pushed", len(r.buf))
		}
		for id := range tok.VocabSize() {
			b := tok.TokenBytes(core.TokenID(id))
			want := len(b) > 0 && r.ok(b)
			if got := mask.Has(core.TokenID(id)); got != want {
				t.Fatalf("words %q: token %d (%q) in mask %v, want %v", words, id, b, got, want)
			}
		}
	}
}

// classLoop is the automaton of [lo-hi]*: one state, a new copy at every byte.
type classLoop struct{ lo, hi byte }

func (a classLoop) Key() string   { return "loop" + string([]byte{a.lo, a.hi}) }
func (a classLoop) Start() uint32 { return 1 }
func (a classLoop) Counted() bool { return true }
func (a classLoop) Step(s uint32, b byte) (uint32, bool) {
	if b < a.lo || b > a.hi {
		return 0, false
	}
	return 1, true
}

// headLoop recognises one byte of head followed by any bytes in [lo-hi]: the language of a
// property name whose first byte rules out the names it cannot be.
type headLoop struct {
	head   string
	lo, hi byte
	n      int // bytes pushed
}

func (r *headLoop) CanAdvance(b byte) bool {
	if r.n == 0 {
		return bytes.IndexByte([]byte(r.head), b) >= 0
	}
	return b >= r.lo && b <= r.hi
}

func (r *headLoop) Advance(b byte) bool {
	if !r.CanAdvance(b) {
		return false
	}
	r.n++
	return true
}

func (r *headLoop) Pop(n int) { r.n -= n }

// TestFillWithChildSlices checks a walk that takes child slices below the first byte against
// the plain walk and against each token's bytes, and that it walks fewer nodes.
func TestFillWithChildSlices(t *testing.T) {
	tok := embeddedTokenizer(t)
	trie := tokentrie.New(tok)
	for _, tc := range []struct {
		head   string
		lo, hi byte
	}{
		{" ", 'a', 'z'},
		{" tT", 'a', 'z'},
		{"abc ", ' ', '~'},
	} {
		loop := classLoop{tc.lo, tc.hi}
		r := &headLoop{head: tc.head, lo: tc.lo, hi: tc.hi}
		child, plain := tokentrie.NewMask(tok.VocabSize()), tokentrie.NewMask(tok.VocabSize())
		calls := 0
		steps := trie.FillWith(r, child, tokentrie.WalkOptions{Child: func(dst []*tokentrie.ChildSlice) []*tokentrie.ChildSlice {
			calls++
			if r.n != 1 {
				t.Fatalf("Child called with %d bytes pushed, want 1", r.n)
			}
			return append(dst, trie.ChildSlice(loop))
		}})
		plainSteps := trie.Fill(r, plain)
		if r.n != 0 {
			t.Fatalf("walks left %d bytes pushed", r.n)
		}
		for id := range tok.VocabSize() {
			b := tok.TokenBytes(core.TokenID(id))
			want := len(b) > 0 && bytes.IndexByte([]byte(tc.head), b[0]) >= 0 && !bytes.ContainsFunc(b[1:], func(c rune) bool { return c < rune(tc.lo) || c > rune(tc.hi) })
			if got := child.Has(core.TokenID(id)); got != want || plain.Has(core.TokenID(id)) != want {
				t.Fatalf("%+v: token %d %q: child walk %v, plain walk %v, want %v", tc, id, b, got, plain.Has(core.TokenID(id)), want)
			}
		}
		if calls == 0 || steps >= plainSteps {
			t.Fatalf("%+v: %d Child calls, %d steps against %d without child slices", tc, calls, steps, plainSteps)
		}
		t.Logf("%+v: %d Child calls, %d steps against %d", tc, calls, steps, plainSteps)
	}
}

// aliasingHeadLoop is headLoop that says, after every byte of the loop past the first two,
// that the state is the same as before it.
type aliasingHeadLoop struct {
	headLoop
	aliased int
}

func (r *aliasingHeadLoop) SameAsPreviousWithin(int) bool {
	if r.n >= 3 {
		r.aliased++
		return true
	}
	return false
}

// TestFillWithAliasing checks that a walk that goes on from the previous state where the
// recogniser says the new one is the same gives the plain walk's mask, and leaves nothing
// pushed.
func TestFillWithAliasing(t *testing.T) {
	tok := embeddedTokenizer(t)
	trie := tokentrie.New(tok)
	for _, head := range []string{" ", " tT", "abc "} {
		r := &aliasingHeadLoop{headLoop: headLoop{head: head, lo: 'a', hi: 'z'}}
		got, want := tokentrie.NewMask(tok.VocabSize()), tokentrie.NewMask(tok.VocabSize())
		trie.Fill(r, got)
		trie.Fill(&r.headLoop, want)
		if r.n != 0 {
			t.Fatalf("%q: the walks left %d bytes pushed", head, r.n)
		}
		for id := range tok.VocabSize() {
			if got.Has(core.TokenID(id)) != want.Has(core.TokenID(id)) {
				t.Fatalf("%q: token %d %q: aliasing walk %v, plain walk %v", head, id, tok.TokenBytes(core.TokenID(id)), got.Has(core.TokenID(id)), want.Has(core.TokenID(id)))
			}
		}
		if r.aliased == 0 {
			t.Fatalf("%q: the walk never went on from a previous state", head)
		}
	}
}

// TestUnionSlice checks the slice of a union of two loops against each token's bytes: a token
// is in it when one of the loops accepts all its bytes.
func TestUnionSlice(t *testing.T) {
	tok := embeddedTokenizer(t)
	trie := tokentrie.New(tok)
	a, b := classLoop{'a', 'm'}, classLoop{'h', 'z'}
	u := tokentrie.Union(a, b)
	if u == nil {
		t.Fatal("Union of two one-state loops is nil")
	}
	union := trie.Slice(u, -1)
	mask := tokentrie.NewMask(tok.VocabSize())
	r := &prefixRecognizer{} // accepts nothing: the mask is the slice's tokens alone
	trie.Fill(r, mask, union)
	in := func(bs []byte, lo, hi byte) bool {
		return !bytes.ContainsFunc(bs, func(c rune) bool { return c < rune(lo) || c > rune(hi) })
	}
	n := 0
	for id := range tok.VocabSize() {
		bs := tok.TokenBytes(core.TokenID(id))
		want := len(bs) > 0 && (in(bs, 'a', 'm') || in(bs, 'h', 'z'))
		if got := mask.Has(core.TokenID(id)); got != want {
			t.Fatalf("token %d %q: in the union's slice %v, want %v", id, bs, got, want)
		}
		if want && in(bs, 'a', 'g') != in(bs, 'n', 'z') { // only one loop accepts it
			n++
		}
	}
	if n == 0 {
		t.Fatal("no token is accepted by one loop alone; the test is vacuous")
	}
	// A part alive wherever the union is: the union is that part.
	if wide := (classLoop{'a', 'z'}); tokentrie.Union(classLoop{'c', 'f'}, wide) != tokentrie.Automaton(wide) {
		t.Error("the union of [c-f]* and [a-z]* is not [a-z]* itself")
	}
}

// BenchmarkSliceBuild builds the slice of a loop on Llama 3's vocabulary (a pass over the
// 268 000-node trie, done once per language and tokenizer): a class most tokens stay in
// (every byte but '"' and '\\'), and one few do (digits); stepped through Step, and read
// from a table (tokentrie.Table, as the parser's automata are); unbounded, and within a
// budget (which counts copies). Every call makes the passes (BuildSlice): Trie.Slice would
// take the slice built for the loop's language before.
func BenchmarkSliceBuild(b *testing.B) {
	tok := llama3vocab.Tokenizer(b)
	trie := tokentrie.New(tok)
	for _, tc := range []struct {
		name   string
		loop   tokentrie.Automaton
		budget int
	}{
		{"string", notQuote{}, -1},
		{"digits", classLoop{'0', '9'}, -1},
		{"string/table", tabulate(notQuote{}), -1},
		{"string/table/budget", tabulate(notQuote{}), 4},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				trie.BuildSlice(tc.loop, tc.budget)
			}
		})
	}
}

// notQuote loops on every byte but '"' and '\\'.
type notQuote struct{}

func (notQuote) Key() string   { return "notQuote" }
func (notQuote) Start() uint32 { return 1 }
func (notQuote) Counted() bool { return true }
func (notQuote) Step(s uint32, b byte) (uint32, bool) {
	if b == '"' || b == '\\' {
		return 0, false
	}
	return 1, true
}

// uncached gives its automaton a new key at every call, so that Trie.Slice builds anew.
type uncached struct{ tokentrie.Automaton }

var uncachedKeys int

func (u uncached) Key() string {
	uncachedKeys++
	return u.Automaton.Key() + "#" + strconv.Itoa(uncachedKeys) // distinct for every call
}

// Table passes on the wrapped automaton's table (tokentrie.Table), if it has one.
func (u uncached) Table() ([]uint16, []uint64) {
	if t, ok := u.Automaton.(tokentrie.Table); ok {
		return t.Table()
	}
	return nil, nil
}

// uncountedLoop is classLoop without copy counts.
type uncountedLoop struct{ classLoop }

func (uncountedLoop) Counted() bool { return false }

// TestSliceBudgetNeedsCountedAutomaton checks Slice's contract for a bounded slice: a counted
// automaton gets its tokens within the budget, an uncounted one nil (its copies are not
// known), whatever slices of it were asked for before.
func TestSliceBudgetNeedsCountedAutomaton(t *testing.T) {
	tok := embeddedTokenizer(t)
	trie := tokentrie.New(tok)
	counted, uncounted := classLoop{'a', 'z'}, uncountedLoop{classLoop{'a', 'y'}}
	if trie.Slice(uncounted, -1) == nil || trie.Slice(counted, -1) == nil {
		t.Fatal("unbounded slices are nil")
	}
	for _, budget := range []int{0, 1, 3, 1000} {
		if s := trie.Slice(uncounted, budget); s != nil {
			t.Errorf("budget %d of an uncounted automaton: a slice of %d tokens, want nil", budget, s.Tokens())
		}
		if s := trie.Slice(counted, budget); s == nil {
			t.Errorf("budget %d of a counted automaton: nil", budget)
		}
	}
}

// TestChildSliceOfAnotherTrie checks that a walk ignores a child slice built on another
// vocabulary's trie (its node numbers are not this trie's) and still gives the plain walk's
// mask.
func TestChildSliceOfAnotherTrie(t *testing.T) {
	tok := embeddedTokenizer(t)
	_, small := testmodel.Default()
	trie, other := tokentrie.New(tok), tokentrie.New(small)
	loop := classLoop{'a', 'z'}
	r := &headLoop{head: " ", lo: 'a', hi: 'z'}
	got, want := tokentrie.NewMask(tok.VocabSize()), tokentrie.NewMask(tok.VocabSize())
	calls := 0
	trie.FillWith(r, got, tokentrie.WalkOptions{Child: func(dst []*tokentrie.ChildSlice) []*tokentrie.ChildSlice {
		calls++
		return append(dst, other.ChildSlice(loop))
	}})
	trie.Fill(r, want)
	if calls == 0 {
		t.Fatal("the walk never asked for child slices")
	}
	for id := range tok.VocabSize() {
		if got.Has(core.TokenID(id)) != want.Has(core.TokenID(id)) {
			t.Fatalf("token %d %q: %v with another trie's child slice, %v by the plain walk", id, tok.TokenBytes(core.TokenID(id)), got.Has(core.TokenID(id)), want.Has(core.TokenID(id)))
		}
	}
}

// table is an automaton given as a dense table (tokentrie.Table), made from another by
// visiting the states reachable from its start.
type table struct {
	key     string
	trans   []uint16
	start   []uint64
	counted bool
}

func tabulate(a tokentrie.Automaton) *table {
	t := &table{key: "table:" + a.Key(), counted: a.Counted()}
	ids := map[uint32]uint16{a.Start(): 1}
	states := []uint32{a.Start()}
	for q := 0; q < len(states); q++ {
		for b := range 256 {
			next, started := a.Step(states[q], byte(b))
			var id uint16
			if next != 0 {
				var ok bool
				if id, ok = ids[next]; !ok {
					states = append(states, next)
					id = uint16(len(states))
					ids[next] = id
				}
			}
			i := q*256 + b
			if i>>6 >= len(t.start) {
				t.start = append(t.start, 0)
			}
			if started {
				t.start[i>>6] |= 1 << (i & 63)
			}
			t.trans = append(t.trans, id)
		}
	}
	return t
}

func (t *table) Key() string                 { return t.key }
func (t *table) Start() uint32               { return 1 }
func (t *table) Counted() bool               { return t.counted }
func (t *table) Table() ([]uint16, []uint64) { return t.trans, t.start }
func (t *table) Step(s uint32, b byte) (uint32, bool) {
	i := (int(s)-1)*256 + int(b)
	return uint32(t.trans[i]), t.start[i>>6]&(1<<(i&63)) != 0
}

// hexPairs is ([0-9a-f][0-9a-f])*: two states, a new copy at every other byte.
type hexPairs struct{}

func (hexPairs) Key() string   { return "hexPairs" }
func (hexPairs) Start() uint32 { return 1 }
func (hexPairs) Counted() bool { return true }
func (hexPairs) Step(s uint32, b byte) (uint32, bool) {
	if !(b >= '0' && b <= '9' || b >= 'a' && b <= 'f') {
		return 0, false
	}
	if s == 1 {
		return 2, true
	}
	return 1, false
}

// automatonRecognizer recognises the prefixes of an automaton's language.
type automatonRecognizer struct {
	a      tokentrie.Automaton
	states []uint32
}

func (r *automatonRecognizer) top() uint32 {
	if len(r.states) == 0 {
		return r.a.Start()
	}
	return r.states[len(r.states)-1]
}
func (r *automatonRecognizer) CanAdvance(b byte) bool { s, _ := r.a.Step(r.top(), b); return s != 0 }
func (r *automatonRecognizer) Advance(b byte) bool {
	s, _ := r.a.Step(r.top(), b)
	if s == 0 {
		return false
	}
	r.states = append(r.states, s)
	return true
}
func (r *automatonRecognizer) Pop(n int) { r.states = r.states[:len(r.states)-n] }

// TestTableSlicesMatchSteps checks that the passes reading an automaton's table (Table) make
// the slices that stepping it one byte at a time makes, whichever budget is asked for first
// (the copies are counted by a second pass, on the first budget): the same tokens for every
// budget, also for an automaton whose Table returns nil (it is stepped), and a walk with the
// slice gives the plain walk's mask in the same steps.
func TestTableSlicesMatchSteps(t *testing.T) {
	tok := embeddedTokenizer(t)
	for _, a := range []tokentrie.Automaton{classLoop{'a', 'z'}, notQuote{}, hexPairs{}, uncountedLoop{classLoop{' ', 'z'}}} {
		tab := tabulate(a)
		for _, order := range [][]int{{-1, 0, 1, 3, 1000}, {3, 0, -1, 1, 1000}, {1000, 1, -1}} {
			stepped, tabled := tokentrie.New(tok), tokentrie.New(tok)
			for _, budget := range order {
				s, ts := stepped.Slice(a, budget), tabled.Slice(tab, budget)
				if (s == nil) != (ts == nil) {
					t.Fatalf("%s, budget %d (order %v): stepped slice %v, table's %v", a.Key(), budget, order, s, ts)
				}
				if s == nil {
					continue
				}
				if s.Tokens() != ts.Tokens() {
					t.Fatalf("%s, budget %d (order %v): %d tokens stepped, %d with the table", a.Key(), budget, order, s.Tokens(), ts.Tokens())
				}
				// A Table whose trans is nil has no table: the pass steps it.
				if ns := stepped.Slice(uncached{a}, budget); ns == nil || ns.Tokens() != s.Tokens() {
					t.Fatalf("%s, budget %d (order %v): a nil table's slice %v, stepped %d tokens", a.Key(), budget, order, ns, s.Tokens())
				}
				if budget >= 0 {
					continue // the recogniser below does not count copies
				}
				plain := tokentrie.NewMask(tok.VocabSize())
				stepped.Fill(&automatonRecognizer{a: a}, plain)
				for _, c := range []struct {
					trie  *tokentrie.Trie
					slice *tokentrie.Slice
				}{{stepped, s}, {tabled, ts}} {
					got := tokentrie.NewMask(tok.VocabSize())
					c.trie.FillWith(&automatonRecognizer{a: a}, got, tokentrie.WalkOptions{Slices: []*tokentrie.Slice{c.slice}})
					if !slices.Equal(got, plain) {
						t.Fatalf("%s: a walk with the slice differs from the plain walk", a.Key())
					}
				}
				withStepped := stepped.FillWith(&automatonRecognizer{a: a}, tokentrie.NewMask(tok.VocabSize()), tokentrie.WalkOptions{Slices: []*tokentrie.Slice{s}})
				withTable := tabled.FillWith(&automatonRecognizer{a: a}, tokentrie.NewMask(tok.VocabSize()), tokentrie.WalkOptions{Slices: []*tokentrie.Slice{ts}})
				if withStepped != withTable {
					t.Fatalf("%s: walks with the slices took %d and %d steps", a.Key(), withStepped, withTable)
				}
			}
		}
	}
}

// wordLoop accepts any number of copies of its word: state s expects the word's byte s-1.
type wordLoop string

func (w wordLoop) Key() string   { return "word:" + string(w) }
func (w wordLoop) Start() uint32 { return 1 }
func (w wordLoop) Counted() bool { return true }
func (w wordLoop) Step(s uint32, b byte) (uint32, bool) {
	if b != w[s-1] {
		return 0, false
	}
	if int(s) == len(w) {
		return 1, s == 1
	}
	return s + 1, s == 1
}

// TestUnionByteClasses checks that the product construction gives the same automaton
// (transitions and key, which spells them out) whether it steps its parts through their
// tables, one byte of each class of bytes they treat alike, or through Step byte by byte.
func TestUnionByteClasses(t *testing.T) {
	for _, parts := range [][]tokentrie.Automaton{
		{wordLoop("ab"), wordLoop("ac")},
		{wordLoop("abc"), wordLoop("bca"), wordLoop("zz")},
		{wordLoop("a\x00\xff"), classLoop{'0', '9'}},
		{wordLoop("xyz"), classLoop{'a', 'y'}},
	} {
		stepped := tokentrie.Union(parts...)
		tables := make([]tokentrie.Automaton, len(parts))
		for i, p := range parts {
			tables[i] = tabulate(p)
		}
		tabled := tokentrie.Union(tables...)
		if stepped == nil || tabled == nil {
			t.Fatalf("%v: Union is nil", parts)
		}
		if stepped.Key() != tabled.Key() {
			t.Errorf("%v: the union read from tables differs from the union stepped byte by byte", parts)
		}
		if slices.Contains(tables, tabled) {
			t.Errorf("%v: Union returned a part; the test needs a proper product", parts)
		}
	}
}

// TestNodeTokens checks that each token of the embedded model's vocabulary and of Llama 3's
// ends at the node its bytes spell.
func TestNodeTokens(t *testing.T) {
	for _, tok := range []core.Tokenizer{embeddedTokenizer(t), llama3vocab.Tokenizer(t)} {
		if err := tokentrie.New(tok).CheckNodeTokens(tok); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUnionKeepsWhatAnyPartKeeps checks a union of two to six parts against its parts on
// random strings: a string keeps the union alive exactly when it keeps one of the parts alive.
func TestUnionKeepsWhatAnyPartKeeps(t *testing.T) {
	words := []wordLoop{"ab", "ba", "abc", "cab", "aab", "bcc"}
	r := rand.New(rand.NewPCG(9, 9))
	for n := 2; n <= len(words); n++ {
		parts := make([]tokentrie.Automaton, n)
		for i := range parts {
			parts[i] = words[i]
		}
		u := tokentrie.Union(parts...)
		if u == nil {
			t.Fatalf("%d parts: no union", n)
		}
		for range 2000 {
			s := make([]byte, 1+r.IntN(9))
			for i := range s {
				s[i] = "abc"[r.IntN(3)]
			}
			want := false
			for _, p := range parts {
				want = want || alive(p, s)
			}
			if got := alive(u, s); got != want {
				t.Fatalf("%d parts, %q: the union keeps it alive: %v, one of the parts: %v", n, s, got, want)
			}
		}
	}
}

// alive reports whether s keeps a alive from its start.
func alive(a tokentrie.Automaton, s []byte) bool {
	st := a.Start()
	for _, b := range s {
		if st, _ = a.Step(st, b); st == 0 {
			return false
		}
	}
	return true
}
