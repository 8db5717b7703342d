package reasoning_test

import (
	"fmt"

	"github.com/loomlm/loom/reasoning"
)

func Example() {
	thinking, answer := reasoning.Think.Split("<think>\nThe user greets me.\n</think>\n\nHello!", false)
	fmt.Printf("%q %q\n", thinking, answer)

	// The same reply streamed: each piece gives out what is known, holding back what may
	// still be a tag.
	s := reasoning.Think.NewSplitter(false)
	for _, piece := range []string{"<thi", "nk>\nThe user", " greets me.\n</th", "ink>\n\nHel", "lo!"} {
		th, an := s.Write(piece)
		fmt.Printf("%q %q\n", th, an)
	}
	// Output:
	// "The user greets me." "Hello!"
	// "" ""
	// "The user" ""
	// " greets me." ""
	// "" "Hel"
	// "" "lo!"
}
