package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/loomlm/loom/cache"
	"github.com/loomlm/loom/core"
	"github.com/loomlm/loom/pipeline"
)

// APIError is an error in the OpenAI format, with the HTTP status it is sent with.
type APIError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
	// RetryAfter, when positive, is sent as the Retry-After header (seconds).
	RetryAfter int `json:"-"`
}

func (e *APIError) Error() string { return e.Message }

// badParam is a 400 error naming the request field at fault.
func badParam(param, format string, args ...any) *APIError {
	p := param
	return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: &p,
		Message: fmt.Sprintf("%s: %s", param, fmt.Sprintf(format, args...))}
}

func codeOf(s string) *string { return &s }

// asAPIError maps any error to an APIError: pipeline build errors (bad overrides) are 400s,
// everything unknown is a 500.
func asAPIError(err error) *APIError {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae
	}
	var pe pipeline.Errors
	if errors.As(err, &pe) {
		return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Message: pe.Error()}
	}
	var param *core.ParamError
	if errors.As(err, &param) { // a request's parameter the strategy refuses (n above beam search's num_beams, say)
		return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: codeOf(param.Param), Message: err.Error()}
	}
	if errors.Is(err, core.ErrContextFull) || errors.Is(err, core.ErrEmptyPrompt) {
		return &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: codeOf("prompt"), Message: err.Error()}
	}
	if errors.Is(err, cache.ErrBudget) {
		return &APIError{Status: http.StatusServiceUnavailable, Type: "server_error", Code: codeOf("kv_cache_full"), RetryAfter: 1,
			Message: "the KV cache has no room for this request now: " + err.Error()}
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &APIError{Status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: codeOf("body_too_large"),
			Message: fmt.Sprintf("request body is larger than the limit of %d bytes", mbe.Limit)}
	}
	return &APIError{Status: http.StatusInternalServerError, Type: "server_error", Message: err.Error()}
}

// writeError sends err as an OpenAI error object.
func writeError(w http.ResponseWriter, err error) {
	ae := asAPIError(err)
	if ae.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
	}
	writeJSON(w, ae.Status, map[string]any{"error": ae})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
