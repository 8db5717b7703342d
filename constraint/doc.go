// Package constraint makes a language model's output follow a formal language: it is a stateful
// logits processor that bans every token whose bytes cannot continue a valid output and allows
// end of sequence only where the output is complete.
//
// The pieces live in sub-packages:
//
//   - grammar parses GBNF (the grammar syntax of llama.cpp) and compiles it to a byte-level
//     context-free grammar;
//   - earley recognises that grammar incrementally, one byte at a time, with an Earley parser
//     whose chart is persistent, so a clone (a beam fork, a snapshot for rollback) costs O(1);
//   - tokentrie holds a vocabulary's token byte strings in a trie built once per tokenizer and
//     computes a token mask by walking it depth first with the parser, skipping every subtree
//     whose prefix the parser rejects, and every subtree wholly inside a vocabulary slice.
//
// A slice is the set of tokens a repetition of the grammar accepts (the characters of a JSON
// string, a run of digits): when the parser may repeat X from its current state, every token
// that is a prefix of enough copies of X is allowed without asking the parser about each
// (earley.Matcher.ActiveRuns). A slice costs one pass over the trie per repetition body and
// tokenizer, cached across grammars; nothing else proportional to the vocabulary is done when a
// grammar is compiled, and nothing is cached per parser state: a mask costs one parser step per
// trie node the walk visits outside the slices. The walk takes slices one byte below the root
// too ("child slices", tokentrie.ChildSlice): after a first byte, the repetitions the parser may
// run only from there (the rest of a property name once its first byte has ruled out the
// names it cannot be); several repetitions at once are one slice of their union; and a rule
// group the grammar declares regular (grammar.Grammar.RegularGroups: the automata of property
// names) has a prefix automaton whose slice is every prefix of its strings.
//
// Two more things keep a mask cheap. Where a byte leaves the parser in the state it was in
// (inside a string, a run of '=' or spaces), or in one that accepts the same bytes for as far
// as the longest token reaches (inside a string of bounded length, while more characters may
// come than that), the walk goes on from that state instead of building one per byte
// (earley.Matcher.SameAsPreviousWithin); what such a walk does without building a state
// depends only on its slices and on the bytes the parser accepts and stays the same after, so
// it is recorded once in a trace the token trie keeps and replayed by later walks from any
// grammar (tokentrie.StayingReporter). And masks are cached by the parser
// state's key within the longest token (earley.Matcher.AppendStateKeyWithin), in a cache
// shared by a processor and its clones: inside a JSON string the state after every character
// has the same key, and inside a string of bounded length too while more characters may come
// than the longest token holds.
package constraint
