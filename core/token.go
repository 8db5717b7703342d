package core

// TokenID identifies a token in a model's vocabulary.
type TokenID = int32

// Candidate is one token of a candidate set and its logit.
type Candidate struct {
	ID    TokenID
	Logit float32
}

// TokenProb is a token with a probability or log-probability, as reported in results and traces.
type TokenProb struct {
	ID    TokenID `json:"id"`
	Text  string  `json:"text,omitempty"`
	Value float32 `json:"value"`
}
