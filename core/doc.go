// Package core is loom's vocabulary: the interfaces every part of a decoding pipeline implements
// (Model, Tokenizer, LogitsProcessor, StoppingCriterion, Strategy), the data that flows between
// them (Candidates, Request, Result, Event), the Session that strategies drive, and Generate.
//
// core imports nothing else of loom. Parts import core; the pipeline package wires parts
// together; cmd/loom wires everything.
//
// # One request
//
// Generate encodes the prompt, opens a Session and hands it to the pipeline's Strategy. The
// strategy prefills the prompt, then loops: forward the pending tokens of the live sequences in
// one batched Model.Forward, run the processor chain on each sequence's logits, select a token
// (argmax or a seeded draw), Append it — which informs stateful processors, checks stopping
// criteria and streams an Event — until every sequence has finished.
//
// # Randomness
//
// A request has one 64-bit seed (a random one is drawn and reported in Result.Seed when the
// request gives none). Sequence i of the request (sample i of n, or beam i) draws from its own
// stream, NewRand(seed, i), so what a sequence generates does not depend on what else is in the
// batch. Parts that need draws of their own derive further streams with DeriveStream.
package core
