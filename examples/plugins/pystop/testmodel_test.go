package pystop_test

import (
	"github.com/loomlm/loom/pipeline"
	"github.com/loomlm/loom/testmodel"
)

// The test runs the example on the small word model of package testmodel (stutters are common
// there), which the loom program does not ship.
func init() { pipeline.RegisterBuiltinModel(testmodel.Name, testmodel.Open) }
