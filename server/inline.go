package server

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/loomlm/loom/pipeline"
)

// inlineFile is the name errors in an inline pipeline carry.
const inlineFile = "request.pipeline"

// inlineEntry turns a pipeline given as TOML in a request (loom's extension field "pipeline")
// into an entry. It is validated like a pipeline file, its errors carrying inlineFile:line; it
// may use only models the server already serves and may declare no plugins, so a request can
// neither load files nor start programs.
func (s *Server) inlineEntry(src string) (*entry, error) {
	spec, err := pipeline.Parse(inlineFile, []byte(src))
	if err != nil {
		return nil, err
	}
	if len(spec.Plugins) > 0 {
		return nil, badParam("pipeline", "declares [[plugins]]: an inline pipeline may not start programs")
	}
	if spec.DraftModel != nil {
		return nil, badParam("pipeline", "declares [draft_model]: an inline pipeline may use only the served models as [model]")
	}
	key, err := modelKey(spec.Model, spec)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	m, ok := s.models[key]
	var served []string
	for k := range s.models {
		served = append(served, strings.TrimSuffix(k, "map[]"))
	}
	s.mu.Unlock()
	if !ok {
		return nil, &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: codeOf("pipeline"),
			Message: fmt.Sprintf("pipeline: [model] must be a model this server already serves (served: %s)", strings.Join(served, ", "))}
	}
	spec.Model.Builtin, spec.Model.Path = m.builtin, ""
	return &entry{name: "inline", spec: spec, reg: pipeline.Builtins(), model: m, created: time.Now().Unix()}, nil
}
