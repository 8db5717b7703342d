package core

// SetPromptRowBytes sets the bound on a prefill's logits rows for PromptLogprobs, so that tests
// can make the prefill run in chunks of a few positions; it returns a function restoring it.
func SetPromptRowBytes(n int) (restore func()) {
	old := promptRowBytes
	promptRowBytes = n
	return func() { promptRowBytes = old }
}
