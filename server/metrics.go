package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/server/batch"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metric names. The queue and KV-cache gauges are what the Gateway API Inference Extension's
// endpoint picker routes on (point its --total-queued-requests-metric and
// --kv-cache-usage-percentage-metric flags at them).
const (
	MetricRequests         = "loom_requests_total"
	MetricPromptTokens     = "loom_prompt_tokens_total"
	MetricGenerationTokens = "loom_generation_tokens_total"
	MetricTTFT             = "loom_time_to_first_token_seconds"
	MetricInterToken       = "loom_inter_token_latency_seconds"
	MetricRunning          = "loom_num_requests_running"
	MetricWaiting          = "loom_num_requests_waiting"
	MetricKVUsage          = "loom_kv_cache_usage_perc"
	MetricBatchSize        = "loom_batch_sessions"
	MetricPrefixReused     = "loom_prefix_cache_reused_tokens_total"
)

// metrics are one server's Prometheus collectors, in a registry of its own.
type metrics struct {
	reg          *prometheus.Registry
	requests     *prometheus.CounterVec
	promptTokens prometheus.Counter
	genTokens    prometheus.Counter
	ttft         prometheus.Histogram
	itl          prometheus.Histogram
	batchSize    prometheus.Histogram
}

func newMetrics(s *Server) *metrics {
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricRequests,
			Help: "Requests answered, by endpoint and HTTP status (499: the client went away)."}, []string{"endpoint", "code"}),
		promptTokens: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricPromptTokens, Help: "Prompt tokens processed."}),
		genTokens:    prometheus.NewCounter(prometheus.CounterOpts{Name: MetricGenerationTokens, Help: "Tokens generated."}),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricTTFT,
			Help: "Time from a request's arrival to its first generated token.", Buckets: latency}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricInterToken,
			Help: "Time between consecutive generated tokens of a request.", Buckets: latency}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{Name: MetricBatchSize,
			Help: "Forward calls merged into one batched model forward.", Buckets: []float64{1, 2, 4, 8, 16, 32, 64}}),
	}
	m.reg.MustRegister(m.requests, m.promptTokens, m.genTokens, m.ttft, m.itl, m.batchSize,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricRunning, Help: "Requests generating now."},
			func() float64 { return float64(s.adm.running()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricWaiting, Help: "Requests waiting for a generation slot or for KV-cache room."},
			func() float64 { return float64(s.adm.queued()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: MetricKVUsage,
			Help: "Fraction of the KV-cache budget held by running sequences, over the loaded models (0 to 1)."},
			s.kvUsage),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: MetricPrefixReused,
			Help: "Prompt positions taken from cached KV blocks instead of computed (prefix reuse across requests); divided by loom_prompt_tokens_total it is the prefix-cache hit rate."},
			s.prefixReused),
		collectors.NewGoCollector(),
	)
	return m
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

func (m *metrics) request(endpoint string, status int) {
	m.requests.WithLabelValues(endpoint, strconv.Itoa(status)).Inc()
}

func (m *metrics) tokens(prompt, generated int) {
	m.promptTokens.Add(float64(prompt))
	m.genTokens.Add(float64(generated))
}

func (m *metrics) step(s batch.Step) { m.batchSize.Observe(float64(s.Calls)) }

func (m *metrics) observer(start time.Time) *observer { return &observer{m: m, start: start} }

// event records a token event: the first gives the time to first token, the others the gaps.
func (o *observer) event() {
	now := time.Now()
	if o.last.IsZero() {
		o.m.ttft.Observe(now.Sub(o.start).Seconds())
	} else {
		o.m.itl.Observe(now.Sub(o.last).Seconds())
	}
	o.last = now
}

// prefixReused sums the positions the loaded models' caches reused from cached prefixes.
func (s *Server) prefixReused() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var n int64
	for _, m := range s.models {
		if c, ok := m.raw.(interface{ Cache() *cache.Pool }); ok && c.Cache() != nil {
			n += c.Cache().Stats().ReusedTokens
		}
	}
	return float64(n)
}

// kvUsage is the fraction of the KV-cache blocks held by running sequences, over every loaded
// model whose cache reports it (loom's runtime); 0 when none does.
func (s *Server) kvUsage() float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	inUse, total := 0, 0
	for _, m := range s.models {
		if c, ok := m.raw.(interface{ Cache() *cache.Pool }); ok && c.Cache() != nil {
			st := c.Cache().Stats()
			inUse += st.InUse
			total += st.MaxBlocks
		}
	}
	if total == 0 {
		return 0
	}
	return float64(inUse) / float64(total)
}
