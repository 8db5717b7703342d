package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/testmodel"
)

// The tests' pipelines declare [model] builtin = "test": the small word model of package
// testmodel, which the loom program does not ship.
func init() { pipeline.RegisterBuiltinModel(testmodel.Name, testmodel.Open) }

// TestProgramHasNoTestModel checks that the loom program does not link the test model: only
// its tests register it.
func TestProgramHasNoTestModel(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/loomlm/loom/models") {
		t.Fatalf("go list -deps lists no github.com/loomlm/loom/models: %v", deps)
	}
	if slices.Contains(deps, "github.com/loomlm/loom/testmodel") {
		t.Error("the loom program imports github.com/loomlm/loom/testmodel")
	}
}
