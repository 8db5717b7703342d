package server

import (
	"fmt"
	"net/http"
	"sort"
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
	return s.servedEntry(src, false)
}

// servedEntry parses a pipeline given as TOML whose models must be served already: [model],
// and, for the workbench, [draft_model]. Only the workbench's pipelines may declare plugins
// (which must be running already, see workbenchEntry).
func (s *Server) servedEntry(src string, workbench bool) (*entry, error) {
	spec, err := pipeline.Parse(inlineFile, []byte(src))
	if err != nil {
		return nil, err
	}
	if len(spec.Plugins) > 0 && !workbench {
		return nil, badParam("pipeline", "declares [[plugins]]: an inline pipeline may not start programs")
	}
	if spec.DraftModel != nil && !workbench {
		return nil, badParam("pipeline", "declares [draft_model]: an inline pipeline may use only the served models as [model]")
	}
	m, err := s.servedModel("model", spec.Model, spec)
	if err != nil {
		return nil, err
	}
	var draft *sharedModel
	if spec.DraftModel != nil {
		if draft, err = s.servedModel("draft_model", *spec.DraftModel, spec); err != nil {
			return nil, err
		}
	}
	return &entry{name: "inline", spec: spec, reg: pipeline.Builtins(), model: m, draft: draft, created: time.Now().Unix()}, nil
}

// servedModel finds the served model a pipeline's [table] declares.
func (s *Server) servedModel(table string, ms pipeline.ModelSpec, spec *pipeline.Spec) (*sharedModel, error) {
	key, err := modelKey(ms, spec)
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
		sort.Strings(served)
		return nil, &APIError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: codeOf("pipeline"),
			Message: fmt.Sprintf("pipeline: [%s] must be a model this server already serves (served: %s)", table, strings.Join(served, ", "))}
	}
	return m, nil
}
