package sdk

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/loomlm/loom/sdk/pluginpb"
	"github.com/loomlm/loom/sdk/shm"
)

type halve struct{}

func (halve) Name() string { return "halve" }
func (halve) Process(_ *Sequence, c *Candidates) error {
	for i, v := range c.Dense() {
		c.Dense()[i] = v / 2
	}
	return nil
}

type banLast struct{ min int }

func (*banLast) Name() string { return "ban_last" }
func (*banLast) Needs() Needs { return NeedsHistory }
func (b *banLast) Configure(cfg *Config) error {
	b.min = cfg.Int("min", 1)
	if b.min < 1 {
		cfg.Errorf("min", "= %d: must be at least 1", b.min)
	}
	return nil
}
func (b *banLast) Process(seq *Sequence, c *Candidates) error {
	if c.HasLogits() {
		panic("a history processor got logits")
	}
	if seq.NumGenerated() >= b.min {
		c.Ban(seq.Tokens()[len(seq.Tokens())-1])
	}
	return nil
}

type keepTwo struct{}

func (keepTwo) Name() string { return "keep_two" }
func (keepTwo) Needs() Needs { return NeedsTop(3) }
func (keepTwo) Process(_ *Sequence, c *Candidates) error {
	items := c.Items()
	c.SetItems(items[:2], c.Sorted())
	return nil
}

type stopOnX struct{}

func (stopOnX) Name() string  { return "stop_x" }
func (stopOnX) HoldBack() int { return 1 }
func (stopOnX) Check(seq *Sequence) Stop {
	if i := strings.IndexByte(string(seq.Text()), 'x'); i >= 0 {
		return Stop{Reason: "x", CutText: true, TextEnd: i}
	}
	return Stop{}
}

func newTestServer(t *testing.T, parts ...any) *server {
	t.Helper()
	s, err := newServer(parts)
	if err != nil {
		t.Fatal(err)
	}
	s.region = nil
	return s
}

func TestDescribeAndConfigure(t *testing.T) {
	s := newTestServer(t, halve{}, &banLast{}, keepTwo{}, stopOnX{})
	d, _ := s.Describe(context.Background(), nil)
	if len(d.Parts) != 4 || d.Parts[1].Needs != pluginpb.Needs_NEEDS_HISTORY || d.Parts[2].TopN != 3 || d.Parts[3].HoldBack != 1 || d.Parts[3].Kind != pluginpb.Kind_KIND_STOPPING {
		t.Fatalf("describe: %v", d)
	}
	cfg, _ := json.Marshal(map[string]any{"min": 0, "other": "x"})
	r, err := s.Configure(context.Background(), &pluginpb.ConfigureRequest{ConfigJson: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Errors) != 2 || r.Errors[0].Key != "min" || r.Errors[0].Message != "= 0: must be at least 1" || r.Errors[1].Key != "other" || r.Errors[1].Message != "unknown key" {
		t.Fatalf("errors: %v", r.Errors)
	}
}

func TestConfigTypes(t *testing.T) {
	var v map[string]any
	json.Unmarshal([]byte(`{"s": 1, "l": ["a", 2], "b": "yes", "i": 1.5, "f": "-inf", "ok": ["a"]}`), &v)
	c := NewConfig(v)
	if c.String("s", "d") != "d" || c.Strings("l", nil) != nil || c.Bool("b", true) != true || c.Int("i", 3) != 3 {
		t.Fatal("defaults not returned for wrong types")
	}
	if !math.IsInf(c.Float("f", 0), -1) || c.Strings("ok", nil)[0] != "a" {
		t.Fatal("good values")
	}
	if len(c.Errors()) != 4 || c.Errors()[0].Error() != "s: = 1: must be a string" {
		t.Fatalf("errors: %v", c.Errors())
	}
}

// rowsInline builds inline rows with dense logits.
func rowInline(index int, tokens []int32, logits []float32) *pluginpb.Row {
	return &pluginpb.Row{Index: int32(index), PromptLen: 1, NumTokens: uint32(len(tokens)), Tokens: tokens, HasLogits: logits != nil, Dense: logits != nil, NumItems: uint32(len(logits)), Logits: logits}
}

func TestProcessInline(t *testing.T) {
	s := newTestServer(t, halve{}, &banLast{min: 1}, keepTwo{})
	reply := &pluginpb.StepReply{}
	req := &pluginpb.StepRequest{Call: &pluginpb.StepRequest_Process{Process: &pluginpb.ProcessCall{Part: 0, Rows: []*pluginpb.Row{
		rowInline(0, []int32{1, 2}, []float32{2, 4, 6}), rowInline(1, []int32{1}, []float32{8, 8, 8}),
	}}}}
	if err := s.step(req, reply); err != nil {
		t.Fatal(err)
	}
	if len(reply.Rows) != 2 || reply.Rows[0].Mode != pluginpb.ReplyMode_REPLY_DENSE || reply.Rows[0].Logits[2] != 3 || reply.Rows[1].Logits[0] != 4 {
		t.Fatalf("dense reply: %v", reply.Rows)
	}

	reply = &pluginpb.StepReply{}
	req.Call = &pluginpb.StepRequest_Process{Process: &pluginpb.ProcessCall{Part: 1, Rows: []*pluginpb.Row{rowInline(0, []int32{1, 2}, nil), rowInline(1, []int32{1}, nil)}}}
	if err := s.step(req, reply); err != nil {
		t.Fatal(err)
	}
	if reply.Rows[0].Mode != pluginpb.ReplyMode_REPLY_EDITS || reply.Rows[0].EditIds[0] != 2 || !math.IsInf(float64(reply.Rows[0].EditDeltas[0]), -1) || reply.Rows[1].Mode != pluginpb.ReplyMode_REPLY_UNCHANGED {
		t.Fatalf("edits reply: %v", reply.Rows)
	}

	reply = &pluginpb.StepReply{}
	top := &pluginpb.Row{HasLogits: true, Sorted: true, NumItems: 3, ItemIds: []int32{7, 3, 5}, ItemLogits: []float32{3, 2, 1}}
	req.Call = &pluginpb.StepRequest_Process{Process: &pluginpb.ProcessCall{Part: 2, Rows: []*pluginpb.Row{top}}}
	if err := s.step(req, reply); err != nil {
		t.Fatal(err)
	}
	if r := reply.Rows[0]; r.Mode != pluginpb.ReplyMode_REPLY_ITEMS || len(r.ItemIds) != 2 || r.ItemIds[1] != 3 || !r.Sorted {
		t.Fatalf("items reply: %v", reply.Rows)
	}
}

// The plugin side reads and writes rows in place in a region the host created.
func TestProcessSharedMemory(t *testing.T) {
	host, err := shm.Create("test", 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	if err := host.File().Truncate(100); err == nil {
		t.Fatal("the sealed region could shrink")
	}
	s := newTestServer(t, halve{})
	s.region = shm.Open(host.File().Fd())
	toks, _ := host.Int32s(64, 2)
	copy(toks, []int32{1, 2})
	logits, _ := host.Float32s(128, 3)
	copy(logits, []float32{2, 4, 6})
	row := &pluginpb.Row{TokensOff: 64, NumTokens: 2, TextOff: 72, HasLogits: true, Dense: true, NumItems: 3, LogitsOff: 128, ItemsOff: 256, ItemsCap: 3}
	reply := &pluginpb.StepReply{}
	req := &pluginpb.StepRequest{ShmSize: 4096, Call: &pluginpb.StepRequest_Process{Process: &pluginpb.ProcessCall{Rows: []*pluginpb.Row{row}}}}
	if err := s.step(req, reply); err != nil {
		t.Fatal(err)
	}
	if reply.Rows[0].Mode != pluginpb.ReplyMode_REPLY_DENSE || len(reply.Rows[0].Logits) != 0 || logits[0] != 1 || logits[2] != 3 {
		t.Fatalf("reply %v, region %v", reply.Rows[0], logits)
	}
	// Growing the region: the plugin remaps when a request says so.
	if err := host.Grow(1 << 16); err != nil {
		t.Fatal(err)
	}
	far, _ := host.Float32s(40000, 3)
	copy(far, []float32{10, 20, 30})
	row.LogitsOff = 40000
	req.ShmSize = 1 << 16
	if err := s.step(req, &pluginpb.StepReply{}); err != nil {
		t.Fatal(err)
	}
	if far[1] != 10 {
		t.Fatalf("after growth: %v", far)
	}
	// Offsets outside the region are refused.
	row.LogitsOff = 1 << 20
	if err := s.step(req, &pluginpb.StepReply{}); err == nil {
		t.Fatal("an offset outside the region was accepted")
	}
}

func TestStop(t *testing.T) {
	s := newTestServer(t, stopOnX{})
	reply := &pluginpb.StepReply{}
	req := &pluginpb.StepRequest{Call: &pluginpb.StepRequest_Stop{Stop: &pluginpb.StopCall{Row: &pluginpb.Row{Text: []byte("abxcd")}}}}
	if err := s.step(req, reply); err != nil {
		t.Fatal(err)
	}
	if reply.Stop.Reason != "x" || !reply.Stop.CutText || reply.Stop.TextEnd != 2 {
		t.Fatalf("stop: %v", reply.Stop)
	}
}

func TestPanicsBecomeErrors(t *testing.T) {
	err := safely(func() error { panic("boom") })
	if err == nil || err.Error() != "panic: boom" {
		t.Fatal(err)
	}
}

func TestCandidatesSparseEdits(t *testing.T) {
	c := &Candidates{}
	c.SetItems([]Candidate{{ID: 4, Logit: 3}, {ID: 9, Logit: 1}}, true)
	c.itemsChanged = false
	c.Ban(4)
	c.AddBias(9, 0.5)
	c.Ban(77) // absent: nothing to change
	if v, _ := c.Logit(9); v != 1.5 || c.Sorted() {
		t.Fatalf("edits: %v sorted=%v", c.items, c.Sorted())
	}
	probs, _, err := c.Probs()
	if err != nil || probs[0] != 0 || probs[1] != 1 {
		t.Fatalf("probs %v, %v", probs, err)
	}
	if len(c.editIDs) != 3 {
		t.Fatalf("edits recorded: %v", c.editIDs)
	}
}
