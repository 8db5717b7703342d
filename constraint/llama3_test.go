package constraint_test

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/loomlm/loom/constraint"
	"github.com/loomlm/loom/constraint/earley"
	loomschema "github.com/loomlm/loom/constraint/jsonschema"
	"github.com/loomlm/loom/constraint/tokentrie"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/internal/llama3vocab"
	"github.com/loomlm/loom/model/tokenizer"
)

// schemaCase is a schema of the mask corpus and the valid documents written under it, with
// their keys in schema order as the constraint writes them.
type schemaCase struct {
	name   string
	schema []byte
	docs   []string
}

// maskCorpus returns the JSON-Schema-Test-Suite's schemas that compile with their valid
// instances, followed by testdata/api-schemas.json: 57 schemas of the kind APIs ask for
// (function-call arguments, extraction and classification results, nested records, $ref,
// oneOf/anyOf) with one valid instance each, checked by python3-jsonschema when written.
func maskCorpus(tb testing.TB) []schemaCase {
	tb.Helper()
	opt := loomschema.Options{FormatAnnotation: true}
	var out []schemaCase
	add := func(name string, schema json.RawMessage, instances []json.RawMessage) {
		if _, err := loomschema.Compile(schema, opt); err != nil {
			return
		}
		s, err := loomschema.Decode(schema)
		if err != nil {
			tb.Fatal(err)
		}
		c := schemaCase{name: name, schema: schema}
		for _, in := range instances {
			inst, err := loomschema.Decode(in)
			if err != nil {
				tb.Fatal(err)
			}
			doc, err := loomschema.Marshal(loomschema.Order(s, inst))
			if err != nil {
				tb.Fatal(err)
			}
			c.docs = append(c.docs, string(doc))
		}
		if len(c.docs) > 0 {
			out = append(out, c)
		}
	}
	files, _ := filepath.Glob("jsonschema/testdata/suite/*.json")
	if len(files) == 0 {
		tb.Fatal("no suite files")
	}
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		var groups []struct {
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Tests       []struct {
				Data  json.RawMessage `json:"data"`
				Valid bool            `json:"valid"`
			} `json:"tests"`
		}
		if err := json.Unmarshal(src, &groups); err != nil {
			tb.Fatal(err)
		}
		for _, g := range groups {
			var valid []json.RawMessage
			for _, tc := range g.Tests {
				if tc.Valid {
					valid = append(valid, tc.Data)
				}
			}
			add(filepath.Base(f)+"/"+g.Description, g.Schema, valid)
		}
	}
	src, err := os.ReadFile("testdata/api-schemas.json")
	if err != nil {
		tb.Fatal(err)
	}
	var api []struct {
		Name     string          `json:"name"`
		Schema   json.RawMessage `json:"schema"`
		Instance json.RawMessage `json:"instance"`
	}
	if err := json.Unmarshal(src, &api); err != nil {
		tb.Fatal(err)
	}
	n := len(out)
	for _, a := range api {
		add("api/"+a.Name, a.Schema, []json.RawMessage{a.Instance})
	}
	if len(out)-n < 50 {
		tb.Fatalf("only %d of the %d API schemas compile", len(out)-n, len(api))
	}
	return out
}

// apiCases returns the API schemas of the corpus.
func apiCases(corpus []schemaCase) []schemaCase {
	for i, c := range corpus {
		if strings.HasPrefix(c.name, "api/") {
			return corpus[i:]
		}
	}
	return nil
}

// TestMaskSlicesExactOnLlama3 walks the API schemas' documents, tokenized by Llama 3's
// 128 256-token vocabulary, and checks at every step that the mask the processor computes —
// with whole vocabulary slices for the repetitions the parser runs — equals the plain walk of
// the token trie, which TestMaskMatchesBruteForce checks token by token. Under the race
// detector every fifth API document is walked.
func TestMaskSlicesExactOnLlama3(t *testing.T) {
	tok := llama3vocab.Tokenizer(t)
	trie := constraint.TrieFor(tok)
	seq := newSeq(t, tok)
	eog := tok.Special().EndOfGeneration
	steps, sliced, childSliced := 0, 0, 0
	before := trie.SliceStats()
	corpus := maskCorpus(t)
	// The API schemas, suite schemas whose property names are automata (where the walk
	// takes child slices one byte below the root), and suite schemas whose objects admit every
	// name but those they list (the names' slices are built in the shadow of a plain
	// string's, which the API schemas build first).
	cases := apiCases(corpus)
	api := len(cases)
	for _, c := range corpus {
		for _, name := range []string{"patternProperties validates properties matching a regex", "dynamic evalation inside nested refs", "additionalProperties with propertyNames", "object properties validation", "properties, patternProperties, additionalProperties interaction", "dependencies with escaped characters"} {
			if strings.HasSuffix(c.name, "/"+name) {
				cases = append(cases, c)
			}
		}
	}
	for i, c := range cases {
		if raceEnabled && i%5 != 0 && i < api {
			continue
		}
		ids, err := tok.Encode(c.docs[0], core.EncodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p, err := constraint.NewJSONSchema(c.schema, loomschema.Options{FormatAnnotation: true})
		if err != nil {
			t.Fatal(err)
		}
		plain := tokentrie.NewMask(tok.VocabSize())
		for step, id := range ids {
			got := p.Mask(tok)
			if len(p.Matcher().ActiveRuns(nil)) > 0 {
				sliced++
			}
			if child, root := constraint.WalkSteps(p, trie); child < root {
				childSliced++
			}
			plain.Clear()
			trie.Fill(plainRecognizer{p.Matcher()}, plain)
			for v := range tok.VocabSize() {
				if slices.Contains(eog, core.TokenID(v)) {
					continue
				}
				if got.Has(core.TokenID(v)) != plain.Has(core.TokenID(v)) {
					t.Fatalf("%s step %d (after %q): token %d %q: mask %v, plain walk %v", c.name, step, tok.Decode(ids[:step]), v, tok.TokenBytes(core.TokenID(v)), got.Has(core.TokenID(v)), plain.Has(core.TokenID(v)))
				}
			}
			if !got.Has(id) {
				t.Fatalf("%s step %d: the document's token %q is masked", c.name, step, tok.TokenBytes(id))
			}
			p.Accept(seq, id)
			steps++
		}
	}
	if sliced < steps/4 {
		t.Fatalf("slices used at %d of %d steps", sliced, steps)
	}
	if childSliced == 0 {
		t.Fatal("no mask took a child slice")
	}
	stats := trie.SliceStats()
	if stats.Shadowed == before.Shadowed {
		t.Fatalf("no slice built in a shadow (%+v)", stats)
	}
	t.Logf("%d steps, %d with vocabulary slices, %d walked fewer nodes with child slices: masks exact; slices %+v", steps, sliced, childSliced, stats)
}

// plainRecognizer hides the matcher's Walker and Aliaser methods: the reference walk pushes
// a parser state for every byte and recycles nothing.
type plainRecognizer struct{ m *earley.Matcher }

func (r plainRecognizer) CanAdvance(b byte) bool { return r.m.CanAdvance(b) }
func (r plainRecognizer) Advance(b byte) bool    { return r.m.Advance(b) }
func (r plainRecognizer) Pop(n int)              { r.m.Pop(n) }

// BenchmarkMaskLlama3 computes token masks over the whole corpus (the test suite's valid
// documents and the API schemas' documents) on Llama 3's vocabulary as a decode loop does:
// each schema compiled, then per document and per token of its canonical tokenization the
// mask of the current state, then the token accepted; finally the mask that allows the end.
// It reports the mask time's average, p50, p99 and maximum over all masks, and the compile
// time's p50 and p99 over all schemas. The token trie is built before the timing (once per
// tokenizer); vocabulary slices are built when a mask first needs them, inside the timing,
// unless LOOM_MASK_WARM is set: then one pass over the corpus runs before the timing, and the
// figures are those of a process that has seen these schemas before.
// Run it on one core: go test ./constraint -run '^$' -bench MaskLlama3 -benchtime 1x -cpu 1
func BenchmarkMaskLlama3(b *testing.B) {
	tok := llama3vocab.Tokenizer(b)
	benchmarkMasks(b, tok)
}

// BenchmarkMaskLlama3StringStart computes the mask just after a string value's opening quote
// on Llama 3's vocabulary, on a fresh clone each time (its parser memo and mask cache empty,
// as for the first mask of each string in a document): a string without a length limit, one
// of at most 80 characters (fewer than Llama 3's longest token holds: the walk builds a
// parser state per byte of each long token down to where the limit rejects it) and one of at
// most 300; and the mask after the first word of a string without a limit ("inside").
func BenchmarkMaskLlama3StringStart(b *testing.B) {
	tok := llama3vocab.Tokenizer(b)
	constraint.TrieFor(tok) // built once per tokenizer, outside the measurement
	seq := newSeq(b, tok)
	for _, tc := range []struct{ name, limit, word string }{{"unbounded", "", ""}, {"max80", `,"maxLength":80`, ""}, {"max300", `,"maxLength":300`, ""}, {"inside", "", "Intro"}} {
		schema := `{"type":"object","properties":{"title":{"type":"string"` + tc.limit + `},"n":{"type":"integer"}},"required":["title","n"],"additionalProperties":false}`
		start, err := constraint.NewJSONSchema([]byte(schema), loomschema.Options{})
		if err != nil {
			b.Fatal(err)
		}
		ids, err := tok.Encode(`{"title":"`+tc.word, core.EncodeOptions{})
		if err != nil {
			b.Fatal(err)
		}
		p := start.Clone().(*constraint.Processor)
		for _, id := range ids {
			p.Accept(seq, id)
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				constraint.Unshared(p).Mask(tok)
			}
		})
	}
}

// BenchmarkMaskLlama3NewStringLimit computes the mask at the start of an array's first string
// item under a schema whose items have length limits the process has not met before (each op
// compiles the schema with another maxLength, and past 400 ops another minLength too, so that
// no op finds the automata of an earlier one): what the first string of a new API schema
// costs.
func BenchmarkMaskLlama3NewStringLimit(b *testing.B) {
	tok := llama3vocab.Tokenizer(b)
	constraint.TrieFor(tok) // built once per tokenizer, outside the measurement
	seq := newSeq(b, tok)
	ids, err := tok.Encode(`["`, core.EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		least := ""
		if n := i / 400; n > 0 {
			least = fmt.Sprintf(`,"minLength":%d`, n)
		}
		schema := fmt.Sprintf(`{"type":"array","items":{"type":"string","maxLength":%d%s}}`, (1001+i)%400+20+i/400, least)
		start, err := constraint.NewJSONSchema([]byte(schema), loomschema.Options{})
		if err != nil {
			b.Fatal(err)
		}
		p := start.Clone().(*constraint.Processor)
		for _, id := range ids {
			p.Accept(seq, id)
		}
		p.Mask(tok)
	}
}

// BenchmarkMaskLlama3BoundedStrings computes the masks of one issue report on Llama 3's
// vocabulary under a schema whose strings have a length limit (a 200-character title, a
// 2 000-character body), the schema compiled anew for each report: inside such a string the
// parser's state changes with every character (fewer may still come), and the masks are shared
// through the keys within the longest token (earley.Matcher.AppendStateKeyWithin).
func BenchmarkMaskLlama3BoundedStrings(b *testing.B) {
	tok := llama3vocab.Tokenizer(b)
	constraint.TrieFor(tok) // built once per tokenizer, outside the measurement
	seq := newSeq(b, tok)
	schema := []byte(`{"type": "object", "properties": {"title": {"type": "string", "maxLength": 200}, "body": {"type": "string", "maxLength": 2000}}, "required": ["title", "body"]}`)
	doc := `{"title":"Crash when saving a file with a long name","body":"` + strings.Repeat("Steps to reproduce: open the editor, type a long file name, press save. Expected: the file is saved. Actual: the app crashes. ", 4) + `"}`
	ids, err := tok.Encode(doc, core.EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	var masks time.Duration
	for b.Loop() {
		start, err := constraint.NewJSONSchema(schema, loomschema.Options{})
		if err != nil {
			b.Fatal(err)
		}
		p := start.Clone().(*constraint.Processor)
		for step, id := range ids {
			t0 := time.Now()
			m := p.Mask(tok)
			masks += time.Since(t0)
			if !m.Has(id) {
				b.Fatalf("token %d %q of the report is masked", step, tok.TokenBytes(id))
			}
			p.Accept(seq, id)
		}
	}
	b.ReportMetric(float64(masks.Nanoseconds())/1e3/float64(b.N*len(ids)), "mask-avg-µs")
}

func benchmarkMasks(b *testing.B, tok *tokenizer.Tokenizer) {
	corpus := maskCorpus(b)
	if only := os.Getenv("LOOM_MASK_SCHEMAS"); only != "" { // a substring of the names, to profile a few
		corpus = slices.DeleteFunc(corpus, func(c schemaCase) bool { return !strings.Contains(c.name, only) })
		if len(corpus) == 0 {
			b.Fatalf("LOOM_MASK_SCHEMAS=%q names no schema of the corpus", only)
		}
	}
	constraint.TrieFor(tok) // built once per tokenizer, outside the measurement
	seq := newSeq(b, tok)
	type doc struct{ ids []core.TokenID }
	docs := make([][]doc, len(corpus))
	for i, c := range corpus {
		for _, d := range c.docs {
			ids, err := tok.Encode(d, core.EncodeOptions{})
			if err != nil {
				b.Fatal(err)
			}
			docs[i] = append(docs[i], doc{ids})
		}
	}
	opt := loomschema.Options{FormatAnnotation: true}
	var masks, compiles []time.Duration
	perSchema := make([]time.Duration, len(corpus))
	pass := func() {
		for i, c := range corpus {
			t0 := time.Now()
			start, err := constraint.NewJSONSchema(c.schema, opt)
			compiles = append(compiles, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			for _, d := range docs[i] {
				p := start.Clone().(*constraint.Processor)
				for step, id := range append(d.ids, tok.Special().EOS) {
					t0 := time.Now()
					m := p.Mask(tok)
					masks = append(masks, time.Since(t0))
					perSchema[i] += masks[len(masks)-1]
					if !m.Has(id) {
						b.Fatalf("%s: token %d %q of the document is masked", c.name, step, tok.TokenBytes(id))
					}
					p.Accept(seq, id)
				}
			}
		}
	}
	if os.Getenv("LOOM_MASK_WARM") != "" {
		// One pass before the timing: the figures are then those of a process whose
		// vocabulary slices and automata are built (every pass still compiles each schema
		// again, with new mask caches).
		pass()
		masks, compiles = masks[:0], compiles[:0]
		clear(perSchema)
		b.ResetTimer()
	}
	for b.Loop() {
		pass()
	}
	report := func(ds []time.Duration, name string, mean bool) {
		slices.Sort(ds)
		us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
		if mean {
			var sum time.Duration
			for _, d := range ds {
				sum += d
			}
			b.ReportMetric(us(sum)/float64(len(ds)), name+"-avg-µs")
			b.ReportMetric(us(ds[len(ds)-1]), name+"-max-µs")
		}
		b.ReportMetric(us(ds[len(ds)/2]), name+"-p50-µs")
		b.ReportMetric(us(ds[len(ds)*99/100]), name+"-p99-µs")
	}
	order := make([]int, len(corpus))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(perSchema[y], perSchema[x]) })
	for _, i := range order[:min(10, len(order))] {
		b.Logf("slowest: %8.1f ms of masks in %s", float64(perSchema[i].Microseconds())/1e3/float64(b.N), corpus[i].name)
	}
	b.Logf("vocabulary slices: %+v", constraint.TrieFor(tok).SliceStats())
	report(masks, "mask", true)
	report(compiles, "compile", false)
	b.ReportMetric(float64(len(masks))/float64(b.N), "masks")
	b.ReportMetric(float64(len(compiles))/float64(b.N), "schemas")
}

// TestMaskWithTwoTokenizers checks that one processor asked for masks of two vocabularies in
// turn gives each the mask a fresh processor gives: the walk's child slices were bound to the
// first vocabulary's trie, whose node numbers mean nothing in the second's.
func TestMaskWithTwoTokenizers(t *testing.T) {
	llama3 := llama3vocab.Tokenizer(t)
	_, small := openDefault(t)
	schema := []byte(`{"type": "object", "patternProperties": {"^[a-z]+_id$": {"type": "integer"}, "^x-[a-z]+$": {"type": "string"}}, "additionalProperties": false}`)
	fresh := func(prefix string) *constraint.Processor {
		p, err := constraint.NewJSONSchema(schema, loomschema.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := p.Matcher().AdvanceBytes([]byte(prefix)); !ok {
			t.Fatalf("prefix %q rejected", prefix)
		}
		return p
	}
	for _, prefix := range []string{`{"`, `{"us`, `{"x-`} {
		p := fresh(prefix)
		for _, tok := range []core.Tokenizer{small, llama3, small} {
			got, want := p.Mask(tok), fresh(prefix).Mask(tok)
			for v := range tok.VocabSize() {
				if got.Has(core.TokenID(v)) != want.Has(core.TokenID(v)) {
					t.Fatalf("after %q, vocabulary of %d: token %d %q: %v, fresh %v", prefix, tok.VocabSize(), v, tok.Piece(core.TokenID(v)), got.Has(core.TokenID(v)), want.Has(core.TokenID(v)))
				}
			}
		}
	}
}
