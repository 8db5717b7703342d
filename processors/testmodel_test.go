package processors_test

import (
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/testmodel"
)

// The tests' pipelines declare [model] builtin = "test": the small word model of package
// testmodel, which the loom program does not ship.
func init() { pipeline.RegisterBuiltinModel(testmodel.Name, testmodel.Open) }
