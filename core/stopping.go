package core

// FinishReason says why a sequence ended.
type FinishReason string

// The finish reasons of loom's built-in parts. Plugins may report their own.
const (
	FinishNone       FinishReason = ""            // still running
	FinishLength     FinishReason = "length"      // max new tokens or the context window
	FinishEOS        FinishReason = "eos"         // an end-of-generation token
	FinishStopToken  FinishReason = "stop_token"  // a configured stop token id
	FinishStopString FinishReason = "stop_string" // a configured stop string
	FinishTime       FinishReason = "time"        // the wall-time limit
	FinishCancelled  FinishReason = "cancelled"   // the caller's context was cancelled
	FinishError      FinishReason = "error"       // the request failed
)

// Stop is a stopping criterion's verdict. The zero value means "continue".
type Stop struct {
	// Reason is non-empty when the sequence must stop.
	Reason FinishReason
	// Detail says what matched, for logs and traces ("stop string \"\\n\\n\"").
	Detail string
	// CutText, when true, cuts the sequence's generated text to its first TextEnd bytes (a
	// stop string that is not to be returned).
	CutText bool
	TextEnd int
}

// StoppingCriterion decides, after each token appended to a sequence, whether it is done.
// Criteria are shared by all sequences of a request and must keep no per-sequence state
// outside the Sequence they are given.
type StoppingCriterion interface {
	Name() string
	Check(seq *Sequence) Stop
}

// TextHolder is implemented by criteria that match text (stop strings): streamed text keeps
// back the last HoldBack() bytes of a running sequence, so a stop string is never shown before
// it is recognised and cut.
type TextHolder interface {
	HoldBack() int
}
