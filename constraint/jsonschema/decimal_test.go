package jsonschema_test

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/loomlm/loom/constraint/earley"
	"github.com/loomlm/loom/constraint/jsonschema"
)

// TestDecimalBounds compiles number schemas with fractional bounds (inclusive and exclusive,
// negative, zero, one side or both) and checks every plain decimal of a grid against exact
// rational arithmetic: the grammar accepts exactly those within the bounds.
func TestDecimalBounds(t *testing.T) {
	type side struct {
		kw, v string
	}
	cases := [][]side{
		{{"minimum", "0"}, {"maximum", "1"}},
		{{"exclusiveMinimum", "0"}, {"exclusiveMaximum", "1"}},
		{{"minimum", "-90"}, {"maximum", "90"}},
		{{"minimum", "-1.5"}, {"exclusiveMaximum", "2.25"}},
		{{"exclusiveMinimum", "-0.05"}, {"maximum", "0"}},
		{{"minimum", "0.1"}},
		{{"exclusiveMinimum", "0"}},
		{{"maximum", "-2.5"}},
		{{"exclusiveMaximum", "1e1"}, {"minimum", "9.99"}},
		{{"minimum", "1.005"}, {"maximum", "1.01"}},
		{{"minimum", "12.5"}, {"maximum", "107"}},
		{{"minimum", "3"}, {"exclusiveMinimum", "3"}, {"maximum", "3.5"}},
	}
	var grid []string
	for _, ip := range []string{"0", "1", "2", "3", "9", "10", "12", "89", "90", "91", "99", "100", "107", "108"} {
		for _, fp := range []string{"", ".0", ".00", ".001", ".005", ".0051", ".01", ".05", ".1", ".10", ".25", ".5", ".50", ".9", ".99", ".999"} {
			grid = append(grid, ip+fp, "-"+ip+fp)
		}
	}
	for _, c := range cases {
		schema := `{"type": "number"`
		for _, s := range c {
			schema += fmt.Sprintf(", %q: %s", s.kw, s.v)
		}
		schema += "}"
		cfg, err := jsonschema.Compile([]byte(schema), jsonschema.Options{})
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		in := 0
		for _, x := range grid {
			v, _ := new(big.Rat).SetString(x)
			want := true
			for _, s := range c {
				b, _ := new(big.Rat).SetString(s.v)
				switch cmp := v.Cmp(b); s.kw {
				case "minimum":
					want = want && cmp >= 0
				case "exclusiveMinimum":
					want = want && cmp > 0
				case "maximum":
					want = want && cmp <= 0
				case "exclusiveMaximum":
					want = want && cmp < 0
				}
			}
			if x[0] == '-' && v.Sign() == 0 {
				want = false // -0 and -0.0 are not written
			}
			m := earley.New(cfg)
			got := true
			for _, b := range []byte(x) {
				if !m.Advance(b) {
					got = false
					break
				}
			}
			got = got && m.IsAccepting()
			if got != want {
				t.Errorf("%s: %s accepted %v, want %v", schema, x, got, want)
			}
			if want {
				in++
			}
		}
		if in == 0 {
			t.Errorf("%s: no number of the grid is in range", schema)
		}
	}
}
