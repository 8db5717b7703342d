package plugins

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/sdk"
	"github.com/loomlm/loom/sdk/pluginpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// strategy is a plugin's strategy as the pipeline sees it. Decode serves the request's
// Session to the plugin through go-plugin's broker and calls the plugin's Decode, which drives
// it. The deadline applies to the plugin's own thinking: if it neither calls the session nor
// returns within its timeout, it is considered hung and killed.
type strategy struct {
	pl   *Plugin
	part uint32
	typ  string
}

var _ core.Strategy = (*strategy)(nil)

func (pl *Plugin) newStrategy(idx uint32, typ string, env *pipeline.Env) (*strategy, error) {
	if _, err := pl.useVocabulary(env); err != nil {
		return nil, err
	}
	return &strategy{pl: pl, part: idx, typ: typ}, nil
}

// Name implements core.Strategy.
func (st *strategy) Name() string { return st.typ }

// Decode implements core.Strategy.
func (st *strategy) Decode(ctx context.Context, s *core.Session) error {
	// Take a running process, then let go of the plugin's lock: the session's processors may
	// belong to the same plugin and need it while Decode runs.
	var proc *process
	if err := st.pl.with(func(p *process) error { proc = p; return nil }); err != nil {
		return err
	}
	srv := &sessionServer{s: s, seqs: map[int32]*core.Sequence{}, timeout: st.pl.timeout}
	// The watchdog runs while the plugin, not the host, is working.
	srv.watch = time.AfterFunc(st.pl.timeout, func() {
		proc.timedOut.Store(true)
		proc.runner.killGroup()
	})
	id := proc.broker.NextId()
	ln, err := proc.broker.Accept(id)
	if err != nil {
		srv.stopWatch()
		return st.pl.errorf("opening the session for the strategy: %v", err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(sdk.MaxMessageSize), grpc.MaxSendMsgSize(sdk.MaxMessageSize))
	pluginpb.RegisterSessionServer(gs, srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = gs.Serve(ln)
	}()
	req := s.Request()
	prompt := s.Prompt()
	dr := &pluginpb.DecodeRequest{Part: st.part, SessionBrokerId: id, N: uint32(req.N), MaxNewTokens: uint32(req.MaxNewTokens), Seed: s.Seed(), Prompt: prompt}
	reply, err := proc.rpc.Decode(ctx, dr)
	srv.stopWatch()
	gs.Stop()
	<-served
	srv.mu.Lock() // what the handlers did happens before what follows
	defer srv.mu.Unlock()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.pl.mu.Lock()
		defer st.pl.mu.Unlock()
		if proc.timedOut.Load() {
			return proc.failed(err)
		}
		if status.Code(err) == codes.Unavailable || proc.dead.Load() {
			return proc.failed(err)
		}
		if srv.hostErr != nil {
			return srv.hostErr
		}
		return st.pl.errorf("strategy %s: %v", st.typ, status.Convert(err).Message())
	}
	if reply.Error != "" {
		if srv.hostErr != nil {
			return srv.hostErr
		}
		return st.pl.errorf("strategy %s: %s", st.typ, clean([]byte(reply.Error)))
	}
	return nil
}

// sessionServer serves one request's core.Session to a strategy plugin. Calls are serialised
// (a Session is used by one goroutine at a time).
type sessionServer struct {
	pluginpb.UnimplementedSessionServer
	mu      sync.Mutex
	s       *core.Session
	seqs    map[int32]*core.Sequence
	watch   *time.Timer
	timeout time.Duration
	stopped bool
	// hostErr is the first error of a host-side part (a processor plugin, the model) met while
	// serving the strategy: it is the request's error, whatever the strategy makes of it.
	hostErr error
}

func (ss *sessionServer) enter() {
	ss.mu.Lock()
	ss.watch.Stop()
}

func (ss *sessionServer) leave() {
	if !ss.stopped {
		ss.watch.Reset(ss.timeout)
	}
	ss.mu.Unlock()
}

func (ss *sessionServer) stopWatch() {
	ss.mu.Lock()
	ss.stopped = true
	ss.watch.Stop()
	ss.mu.Unlock()
}

func (ss *sessionServer) hostError(err error) error {
	if err == nil {
		return nil
	}
	if ss.hostErr == nil {
		ss.hostErr = err
	}
	return status.Error(codes.FailedPrecondition, err.Error())
}

func (ss *sessionServer) seq(i int32) (*core.Sequence, error) {
	q, ok := ss.seqs[i]
	if !ok {
		return nil, status.Errorf(codes.InvalidArgument, "no sequence %d", i)
	}
	return q, nil
}

func (ss *sessionServer) seqList(ids []int32) ([]*core.Sequence, error) {
	out := make([]*core.Sequence, len(ids))
	for i, id := range ids {
		q, err := ss.seq(id)
		if err != nil {
			return nil, err
		}
		out[i] = q
	}
	return out, nil
}

func info(q *core.Sequence) *pluginpb.SequenceInfo {
	text := q.Text()
	return &pluginpb.SequenceInfo{
		Index:        int32(q.Index()),
		Tokens:       q.Generated(),
		Text:         text,
		FinishReason: string(q.FinishReason()),
	}
}

func infos(qs ...*core.Sequence) *pluginpb.Sequences {
	out := &pluginpb.Sequences{}
	for _, q := range qs {
		out.Sequences = append(out.Sequences, info(q))
	}
	return out
}

func (ss *sessionServer) track(qs ...*core.Sequence) {
	for _, q := range qs {
		ss.seqs[int32(q.Index())] = q
	}
}

func (ss *sessionServer) Start(_ context.Context, r *pluginpb.StartRequest) (*pluginpb.Sequences, error) {
	ss.enter()
	defer ss.leave()
	if len(ss.seqs) > 0 {
		return nil, status.Error(codes.FailedPrecondition, "Start was already called")
	}
	qs, err := ss.s.Start(int(max(r.N, 1)))
	if err != nil {
		return nil, ss.hostError(err)
	}
	ss.track(qs...)
	return infos(qs...), nil
}

func (ss *sessionServer) Fork(_ context.Context, r *pluginpb.SeqRef) (*pluginpb.Sequences, error) {
	ss.enter()
	defer ss.leave()
	q, err := ss.seq(r.Index)
	if err != nil {
		return nil, err
	}
	f, err := ss.s.Fork(q)
	if err != nil {
		return nil, ss.hostError(err)
	}
	ss.track(f)
	return infos(f), nil
}

func (ss *sessionServer) Forward(_ context.Context, r *pluginpb.SeqRefs) (*pluginpb.Empty, error) {
	ss.enter()
	defer ss.leave()
	qs, err := ss.seqList(r.Indices)
	if err != nil {
		return nil, err
	}
	return &pluginpb.Empty{}, ss.hostError(ss.s.Forward(qs...))
}

func (ss *sessionServer) Process(_ context.Context, r *pluginpb.ProcessRequest) (*pluginpb.ProcessReply, error) {
	ss.enter()
	defer ss.leave()
	qs, err := ss.seqList(r.Indices)
	if err != nil {
		return nil, err
	}
	cands, err := ss.s.ProcessBatch(qs)
	if err != nil {
		return nil, ss.hostError(err)
	}
	out := &pluginpb.ProcessReply{}
	for _, c := range cands {
		_, logZ, err := c.Probs()
		if err != nil {
			return nil, ss.hostError(err)
		}
		top := topCandidates(nil, c, int(max(r.TopN, 1)))
		pc := &pluginpb.Candidates{}
		for _, it := range top {
			pc.Top = append(pc.Top, &pluginpb.TokenLogprob{Id: it.ID, Logprob: it.Logit - logZ})
		}
		out.Candidates = append(out.Candidates, pc)
	}
	return out, nil
}

func (ss *sessionServer) choose(qs []*core.Sequence, mode pluginpb.SelectMode) ([]core.Choice, error) {
	cands, err := ss.s.ProcessBatch(qs)
	if err != nil {
		return nil, ss.hostError(err)
	}
	out := make([]core.Choice, len(qs))
	for i, q := range qs {
		var ch core.Choice
		if mode == pluginpb.SelectMode_SELECT_SAMPLE {
			ch, err = ss.s.Sample(q, cands[i])
		} else {
			ch, err = ss.s.Greedy(q, cands[i])
		}
		if err != nil {
			return nil, ss.hostError(err)
		}
		out[i] = ch
	}
	return out, nil
}

func (ss *sessionServer) Select(_ context.Context, r *pluginpb.SelectRequest) (*pluginpb.SelectReply, error) {
	ss.enter()
	defer ss.leave()
	qs, err := ss.seqList(r.Indices)
	if err != nil {
		return nil, err
	}
	chs, err := ss.choose(qs, r.Mode)
	if err != nil {
		return nil, err
	}
	out := &pluginpb.SelectReply{}
	for _, ch := range chs {
		out.Choices = append(out.Choices, &pluginpb.TokenLogprob{Id: ch.ID, Logprob: ch.Logprob})
	}
	return out, nil
}

func (ss *sessionServer) Append(_ context.Context, r *pluginpb.AppendRequest) (*pluginpb.Sequences, error) {
	ss.enter()
	defer ss.leave()
	q, err := ss.seq(r.Index)
	if err != nil {
		return nil, err
	}
	if r.Choice == nil {
		return nil, status.Error(codes.InvalidArgument, "no token")
	}
	if err := ss.s.Append(q, core.Choice{ID: r.Choice.Id, Logprob: r.Choice.Logprob}); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	out := infos(q)
	out.Sequences[0].LastLogprob = r.Choice.Logprob
	return out, nil
}

func (ss *sessionServer) Step(_ context.Context, r *pluginpb.SelectRequest) (*pluginpb.Sequences, error) {
	ss.enter()
	defer ss.leave()
	qs, err := ss.seqList(r.Indices)
	if err != nil {
		return nil, err
	}
	qs = slices.Compact(qs) // one token per sequence, however often it is listed
	if err := ss.s.Forward(qs...); err != nil {
		return nil, ss.hostError(err)
	}
	live := core.Live(nil, qs)
	chosen := map[int]float32{}
	if len(live) > 0 {
		chs, err := ss.choose(live, r.Mode)
		if err != nil {
			return nil, err
		}
		for i, q := range live {
			if err := ss.s.Append(q, chs[i]); err != nil {
				return nil, ss.hostError(err)
			}
			chosen[q.Index()] = chs[i].Logprob
		}
	}
	out := infos(qs...)
	for _, in := range out.Sequences {
		in.LastLogprob = chosen[int(in.Index)]
	}
	return out, nil
}

func (ss *sessionServer) Finish(_ context.Context, r *pluginpb.FinishRequest) (*pluginpb.Empty, error) {
	ss.enter()
	defer ss.leave()
	q, err := ss.seq(r.Index)
	if err != nil {
		return nil, err
	}
	if r.Reason == "" {
		return nil, status.Error(codes.InvalidArgument, "finish needs a reason")
	}
	ss.s.Finish(q, core.FinishReason(clean([]byte(r.Reason))), clean([]byte(r.Detail)))
	return &pluginpb.Empty{}, nil
}

func (ss *sessionServer) Truncate(_ context.Context, r *pluginpb.TruncateRequest) (*pluginpb.Sequences, error) {
	ss.enter()
	defer ss.leave()
	q, err := ss.seq(r.Index)
	if err != nil {
		return nil, err
	}
	if err := ss.s.Truncate(q, q.PromptLen()+int(r.Length)); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return infos(q), nil
}

func (ss *sessionServer) Discard(_ context.Context, r *pluginpb.SeqRef) (*pluginpb.Empty, error) {
	ss.enter()
	defer ss.leave()
	q, err := ss.seq(r.Index)
	if err != nil {
		return nil, err
	}
	ss.s.Discard(q)
	delete(ss.seqs, r.Index)
	return &pluginpb.Empty{}, nil
}

func (ss *sessionServer) SetScore(_ context.Context, r *pluginpb.ScoreRequest) (*pluginpb.Empty, error) {
	ss.enter()
	defer ss.leave()
	q, err := ss.seq(r.Index)
	if err != nil {
		return nil, err
	}
	q.SetScore(r.SumLogprob, r.Score)
	return &pluginpb.Empty{}, nil
}

func (ss *sessionServer) SetOutputs(_ context.Context, r *pluginpb.SeqRefs) (*pluginpb.Empty, error) {
	ss.enter()
	defer ss.leave()
	qs, err := ss.seqList(r.Indices)
	if err != nil {
		return nil, err
	}
	ss.s.SetOutputs(qs)
	return &pluginpb.Empty{}, nil
}

func (ss *sessionServer) Get(_ context.Context, r *pluginpb.SeqRefs) (*pluginpb.Sequences, error) {
	ss.enter()
	defer ss.leave()
	qs, err := ss.seqList(r.Indices)
	if err != nil {
		return nil, err
	}
	return infos(qs...), nil
}
