package sdk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/hashicorp/go-plugin"
	"github.com/loomlm/loom/sdk/pluginpb"
	"github.com/loomlm/loom/sdk/shm"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"
)

// sdkName identifies this library in Describe replies.
const sdkName = "loom-sdk-go/1"

// part is one served part and what it is.
type part struct {
	kind  pluginpb.Kind
	name  string
	value any
	proc  Processor
	stop  StoppingCriterion
	strat Strategy
	needs Needs
}

// server implements the plugin side of the protocol over the author's parts.
type server struct {
	pluginpb.UnimplementedPluginServer
	parts  []*part
	broker *plugin.GRPCBroker
	region *shm.Region
	vocab  *Vocabulary

	// bell, when the host gave one, serves steps through the mailbox (see shm).
	bell *doorbell

	// per-step scratch, reused (the host sends one step at a time)
	seqs  []*Sequence
	cands []*Candidates
}

type doorbell struct {
	in, out int
	req     pluginpb.StepRequest
	buf     []byte
}

// openDoorbell returns the doorbell the host handed over, or nil.
func openDoorbell() *doorbell {
	v := os.Getenv(shm.EnvDoorbell)
	a, b, ok := strings.Cut(v, ",")
	if !ok {
		return nil
	}
	in, err1 := strconv.Atoi(a)
	out, err2 := strconv.Atoi(b)
	if err1 != nil || err2 != nil || in < 3 || out < 3 {
		return nil
	}
	var st unix.Stat_t
	if unix.Fstat(in, &st) != nil || unix.Fstat(out, &st) != nil {
		return nil
	}
	// Receive polls: the read end must not block.
	if unix.SetNonblock(in, true) != nil {
		return nil
	}
	return &doorbell{in: in, out: out}
}

// wakeSpin is how long the plugin polls for a step after the host's wake-up ring: the time
// the host takes to copy a step's logits, with room to spare.
const wakeSpin = 500 * time.Microsecond

// serveDoorbell answers the steps the host rings for, until the host goes away.
func (s *server) serveDoorbell() {
	runtime.LockOSThread()
	for {
		b, err := shm.Receive(s.bell.in, 0)
		for err == nil && b == shm.WakeByte {
			b, err = shm.Receive(s.bell.in, wakeSpin)
		}
		if err != nil {
			return
		}
		s.mailboxStep()
		if err := shm.Ring(s.bell.out); err != nil {
			return
		}
	}
}

// mailboxStep reads the request in the mailbox and writes the reply over it.
func (s *server) mailboxStep() {
	b := s.bell
	reply := &pluginpb.StepReply{}
	err := s.mapHeader()
	var n, capacity uint64
	if err == nil {
		n, capacity = s.region.MailboxLen()
		if err = s.region.Ensure(int(shm.MailboxOffset + capacity)); err == nil {
			var msg []byte
			if msg, err = s.region.Mailbox(int(n)); err == nil {
				b.req.Reset()
				err = proto.Unmarshal(msg, &b.req)
			}
		}
	}
	if err == nil {
		reply.Id = b.req.Id
		if err := safely(func() error { return s.step(&b.req, reply) }); err != nil {
			reply.Error = err.Error()
			reply.Rows, reply.Stop = nil, nil
		}
	} else {
		reply.Error = "reading the mailbox: " + err.Error()
	}
	out, err := proto.MarshalOptions{}.MarshalAppend(b.buf[:0], reply)
	if err == nil && uint64(len(out)) > capacity {
		err = fmt.Errorf("reply of %d bytes exceeds the mailbox's %d", len(out), capacity)
	}
	if err != nil {
		out, _ = proto.Marshal(&pluginpb.StepReply{Id: reply.Id, Error: err.Error()})
	}
	b.buf = out
	if mb, err := s.region.Mailbox(len(out)); err == nil {
		copy(mb, out)
		s.region.SetMailboxLen(uint64(len(out)))
	}
}

// mapHeader makes sure the region's header is mapped.
func (s *server) mapHeader() error {
	if s.region.Size() >= shm.MailboxOffset {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(s.region.File().Fd()), &st); err != nil {
		return err
	}
	return s.region.Ensure(int(st.Size))
}

func newServer(values []any) (*server, error) {
	s := &server{region: shm.OpenFromEnv()}
	if s.region != nil {
		s.bell = openDoorbell()
	}
	if len(values) == 0 {
		return nil, errors.New("Serve needs at least one part")
	}
	seen := map[string]bool{}
	for i, v := range values {
		p := &part{value: v}
		switch x := v.(type) {
		case Processor:
			p.kind, p.name, p.proc = pluginpb.Kind_KIND_PROCESSOR, x.Name(), x
			p.needs = NeedsLogits
			if d, ok := x.(NeedsDeclarer); ok {
				p.needs = d.Needs()
			}
		case StoppingCriterion:
			p.kind, p.name, p.stop = pluginpb.Kind_KIND_STOPPING, x.Name(), x
		case Strategy:
			p.kind, p.name, p.strat = pluginpb.Kind_KIND_STRATEGY, x.Name(), x
		default:
			return nil, fmt.Errorf("part %d (%T) is not a Processor, StoppingCriterion or Strategy", i, v)
		}
		key := p.kind.String() + "/" + p.name
		if p.name == "" || seen[key] {
			return nil, fmt.Errorf("part %d (%T): empty or repeated name %q", i, v, p.name)
		}
		seen[key] = true
		s.parts = append(s.parts, p)
	}
	return s, nil
}

func (s *server) close() {
	if s.region != nil {
		s.region.Close()
	}
}

func (s *server) Describe(context.Context, *pluginpb.DescribeRequest) (*pluginpb.DescribeReply, error) {
	if s.bell != nil {
		if err := s.mapHeader(); err != nil {
			s.bell = nil
		} else {
			s.region.SetFeatures(shm.FeatureWake)
		}
	}
	r := &pluginpb.DescribeReply{SharedMemory: s.region != nil, Doorbell: s.bell != nil, Sdk: sdkName}
	for _, p := range s.parts {
		d := &pluginpb.Part{Kind: p.kind, Name: p.name}
		if doc, ok := p.value.(Documented); ok {
			d.Doc = doc.Doc()
		}
		switch p.needs.kind {
		case needTop:
			d.Needs, d.TopN = pluginpb.Needs_NEEDS_TOP, uint32(p.needs.n)
		case needHistory:
			d.Needs = pluginpb.Needs_NEEDS_HISTORY
		}
		if h, ok := p.value.(TextHolder); ok {
			d.HoldBack = uint32(max(h.HoldBack(), 0))
		}
		r.Parts = append(r.Parts, d)
	}
	return r, nil
}

func (s *server) Configure(_ context.Context, req *pluginpb.ConfigureRequest) (r *pluginpb.ConfigureReply, err error) {
	values := map[string]any{}
	if len(req.ConfigJson) > 0 {
		if err := json.Unmarshal(req.ConfigJson, &values); err != nil {
			return nil, fmt.Errorf("config is not a JSON object: %v", err)
		}
	}
	cfg := NewConfig(values)
	cfg.plugin = req.PluginName
	configured := false
	for _, p := range s.parts {
		c, ok := p.value.(Configurable)
		if !ok {
			continue
		}
		configured = true
		if err := safely(func() error { return c.Configure(cfg) }); err != nil {
			var ce *ConfigError
			if errors.As(err, &ce) {
				cfg.errs = append(cfg.errs, ce)
			} else {
				cfg.Errorf("", "%s: %v", p.name, err)
			}
		}
	}
	for _, k := range cfg.unread() {
		if configured {
			cfg.Errorf(k, "unknown key")
		} else {
			cfg.Errorf(k, "unknown key: this plugin takes no configuration")
		}
	}
	r = &pluginpb.ConfigureReply{}
	for _, e := range cfg.errs {
		r.Errors = append(r.Errors, &pluginpb.ConfigError{Key: e.Key, Message: e.Message})
	}
	sort.SliceStable(r.Errors, func(i, j int) bool { return r.Errors[i].Key < r.Errors[j].Key })
	return r, nil
}

func (s *server) SetVocabulary(_ context.Context, v *pluginpb.Vocabulary) (*pluginpb.VocabularyReply, error) {
	s.vocab = &Vocabulary{Size: int(v.Size), Tokens: v.Tokens, BOS: v.Bos, EOS: v.Eos}
	for _, id := range v.EndOfGeneration {
		s.vocab.EndOfGeneration = append(s.vocab.EndOfGeneration, id)
	}
	for _, p := range s.parts {
		if u, ok := p.value.(VocabularyUser); ok {
			if err := safely(func() error { return u.UseVocabulary(s.vocab) }); err != nil {
				return &pluginpb.VocabularyReply{Error: fmt.Sprintf("%s: %v", p.name, err)}, nil
			}
		}
	}
	return &pluginpb.VocabularyReply{}, nil
}

// safely runs f, turning a panic into an error (the stack goes to the log).
func safely(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			Log.Error("panic", "value", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

func (s *server) Steps(stream pluginpb.Plugin_StepsServer) error {
	for {
		req, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		reply := &pluginpb.StepReply{Id: req.Id}
		if err := safely(func() error { return s.step(req, reply) }); err != nil {
			reply.Error = err.Error()
			reply.Rows, reply.Stop = nil, nil
		}
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
}

func (s *server) part(i uint32, kind pluginpb.Kind) (*part, error) {
	if int(i) >= len(s.parts) || s.parts[i].kind != kind {
		return nil, fmt.Errorf("no %s part number %d", kind, i)
	}
	return s.parts[i], nil
}

func (s *server) step(req *pluginpb.StepRequest, reply *pluginpb.StepReply) error {
	if s.region != nil && req.ShmSize > 0 {
		if err := s.region.Ensure(int(req.ShmSize)); err != nil {
			return err
		}
	}
	switch call := req.Call.(type) {
	case *pluginpb.StepRequest_Process:
		p, err := s.part(call.Process.Part, pluginpb.Kind_KIND_PROCESSOR)
		if err != nil {
			return err
		}
		return s.process(p, call.Process.Rows, reply)
	case *pluginpb.StepRequest_Stop:
		p, err := s.part(call.Stop.Part, pluginpb.Kind_KIND_STOPPING)
		if err != nil {
			return err
		}
		if call.Stop.Row == nil {
			return errors.New("stop call without a row")
		}
		seq := &Sequence{}
		if err := s.loadSequence(seq, call.Stop.Row); err != nil {
			return err
		}
		st := p.stop.Check(seq)
		reply.Stop = &pluginpb.StopReply{Reason: string(st.Reason), Detail: st.Detail, CutText: st.CutText, TextEnd: int32(st.TextEnd)}
		return nil
	}
	return errors.New("empty step request")
}

func (s *server) loadSequence(q *Sequence, row *pluginpb.Row) error {
	*q = Sequence{index: int(row.Index), promptLen: int(row.PromptLen)}
	if !s.shared(row) {
		q.tokens, q.text = row.Tokens, row.Text
		return nil
	}
	var err error
	if q.tokens, err = s.region.Int32s(row.TokensOff, int(row.NumTokens)); err != nil {
		return err
	}
	q.text, err = s.region.Bytes(row.TextOff, int(row.TextLen))
	return err
}

// shared reports whether a row's data lies in shared memory (the host never places data at
// offset 0).
func (s *server) shared(row *pluginpb.Row) bool { return s.region != nil && row.TokensOff != 0 }

func (s *server) process(p *part, rows []*pluginpb.Row, reply *pluginpb.StepReply) error {
	for len(s.seqs) < len(rows) {
		s.seqs = append(s.seqs, &Sequence{})
		s.cands = append(s.cands, &Candidates{})
	}
	seqs, cands := s.seqs[:len(rows)], s.cands[:len(rows)]
	for i, row := range rows {
		if err := s.loadSequence(seqs[i], row); err != nil {
			return err
		}
		if err := s.loadCandidates(cands[i], row); err != nil {
			return err
		}
	}
	if bp, ok := p.proc.(BatchProcessor); ok && len(rows) > 1 {
		if err := bp.ProcessBatch(seqs, cands); err != nil {
			return err
		}
	} else {
		for i := range rows {
			if err := p.proc.Process(seqs[i], cands[i]); err != nil {
				return err
			}
		}
	}
	reply.Rows = make([]*pluginpb.RowReply, len(rows))
	for i, row := range rows {
		rr, err := s.rowReply(cands[i], row)
		if err != nil {
			return fmt.Errorf("sequence %d: %w", row.Index, err)
		}
		reply.Rows[i] = rr
	}
	return nil
}

func (s *server) loadCandidates(c *Candidates, row *pluginpb.Row) error {
	c.reset()
	buf := c.buf[:0]
	c.buf = nil
	if !row.HasLogits {
		c.noLogs = true
		return nil
	}
	if s.shared(row) {
		if row.Dense {
			d, err := s.region.Float32s(row.LogitsOff, int(row.NumItems))
			if err != nil {
				return err
			}
			c.dense = d
		}
		items, err := s.region.Items(row.ItemsOff, int(row.ItemsCap))
		if err != nil {
			return err
		}
		c.buf = asCandidates(items)
		if !row.Dense {
			if row.NumItems > row.ItemsCap {
				return fmt.Errorf("%d items but room for %d", row.NumItems, row.ItemsCap)
			}
			c.items, c.sorted = c.buf[:row.NumItems], row.Sorted
		}
		return nil
	}
	c.buf = buf
	if row.Dense {
		c.dense = row.Logits
		return nil
	}
	if len(row.ItemIds) != len(row.ItemLogits) {
		return errors.New("item ids and logits differ in length")
	}
	items := c.Buffer(len(row.ItemIds))
	for i, id := range row.ItemIds {
		items[i] = Candidate{ID: id, Logit: row.ItemLogits[i]}
	}
	c.items, c.sorted = items, row.Sorted
	return nil
}

// asCandidates views shared-memory items as Candidates (same layout).
func asCandidates(items []shm.Item) []Candidate {
	if len(items) == 0 {
		return nil
	}
	return unsafe.Slice((*Candidate)(unsafe.Pointer(&items[0])), len(items))
}

func (s *server) rowReply(c *Candidates, row *pluginpb.Row) (*pluginpb.RowReply, error) {
	rr := &pluginpb.RowReply{}
	shared := s.shared(row)
	switch {
	case c.dense != nil && c.denseChanged:
		rr.Mode = pluginpb.ReplyMode_REPLY_DENSE
		if !shared {
			rr.Logits = c.dense
		}
	case c.dense == nil && c.itemsChanged && !c.noLogs:
		rr.Mode = pluginpb.ReplyMode_REPLY_ITEMS
		rr.NumItems, rr.Sorted = uint32(len(c.items)), c.sorted
		if shared {
			if len(c.items) > int(row.ItemsCap) {
				return nil, fmt.Errorf("%d items do not fit the host's room for %d", len(c.items), row.ItemsCap)
			}
			room, _ := s.region.Items(row.ItemsOff, int(row.ItemsCap))
			dst := asCandidates(room)
			if len(c.items) > 0 && &dst[0] != &c.items[0] {
				copy(dst, c.items)
			}
		} else {
			rr.ItemIds = make([]int32, len(c.items))
			rr.ItemLogits = make([]float32, len(c.items))
			for i, it := range c.items {
				rr.ItemIds[i], rr.ItemLogits[i] = it.ID, it.Logit
			}
		}
	case len(c.editIDs) > 0:
		rr.Mode = pluginpb.ReplyMode_REPLY_EDITS
		rr.EditIds = append([]int32(nil), c.editIDs...)
		rr.EditDeltas = append([]float32(nil), c.editDeltas...)
	}
	return rr, nil
}

func (s *server) Decode(ctx context.Context, req *pluginpb.DecodeRequest) (*pluginpb.DecodeReply, error) {
	p, err := s.part(req.Part, pluginpb.Kind_KIND_STRATEGY)
	if err != nil {
		return nil, err
	}
	conn, err := s.broker.Dial(req.SessionBrokerId)
	if err != nil {
		return nil, fmt.Errorf("connecting to the host's session: %w", err)
	}
	defer conn.Close()
	sess := &Session{
		ctx:    ctx,
		client: pluginpb.NewSessionClient(conn),
		req:    Request{N: int(req.N), MaxNewTokens: int(req.MaxNewTokens), Seed: req.Seed, Prompt: req.Prompt},
		seqs:   map[int]*Sequence{},
	}
	if err := safely(func() error { return p.strat.Decode(ctx, sess) }); err != nil {
		return &pluginpb.DecodeReply{Error: err.Error()}, nil
	}
	return &pluginpb.DecodeReply{}, nil
}
