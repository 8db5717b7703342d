// Package sdk is what a loom plugin imports. A plugin is a separate program that loom starts
// when a pipeline declares it in [[plugins]]; it serves logits processors, stopping criteria
// or strategies that pipelines then use like built-in parts.
//
// A plugin part is a plain Go value implementing an interface close to loom's own (core)
// interfaces, and the plugin's main is one call:
//
//	type BanDigits struct{}
//
//	func (BanDigits) Name() string { return "ban_digits" }
//
//	func (BanDigits) Process(seq *sdk.Sequence, c *sdk.Candidates) error {
//		for _, id := range digitTokens {
//			c.Ban(id)
//		}
//		return nil
//	}
//
//	func main() { sdk.ServeProcessor(BanDigits{}) }
//
// The transport (hashicorp/go-plugin over gRPC, logits in shared memory) stays inside this
// package. Optional interfaces add what a part needs: Configurable receives the plugin's
// [plugins.config] table and validates it at start; VocabularyUser receives the model's
// vocabulary; NeedsDeclarer says whether a processor reads the logits, only the top
// candidates, or only the token history. Log through Log: lines reach the host's log under
// the plugin's name.
//
// See docs/plugins.md in the loom repository for declaring, building and debugging plugins.
package sdk
