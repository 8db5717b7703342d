package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
)

// TestPretokenizersMatchRegex checks the hand-written scanners against testdata/
// pretokenize.json: the splits of the original regular expressions, computed with a
// backtracking regex engine (see testdata/pretokenize.py).
func TestPretokenizersMatchRegex(t *testing.T) {
	data, err := os.ReadFile("testdata/pretokenize.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Pre    string   `json:"pre"`
		Text   string   `json:"text"`
		Pieces []string `json:"pieces"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	failures := 0
	for _, c := range cases {
		p, ok := pretokenizers[c.Pre]
		if !ok {
			t.Fatalf("no pre-tokenizer %q", c.Pre)
		}
		var got []string
		p.split(c.Text, func(w string) { got = append(got, w) })
		if c.Pieces == nil {
			c.Pieces = []string{}
		}
		if got == nil {
			got = []string{}
		}
		if !slices.Equal(got, c.Pieces) {
			t.Errorf("%s %q:\n got %q\nwant %q", c.Pre, c.Text, got, c.Pieces)
			if failures++; failures > 20 {
				t.Fatal("too many failures")
			}
		}
	}
}
