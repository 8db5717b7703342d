// Package tokentrie holds a vocabulary's token byte strings in a trie, built once per
// tokenizer and shared by every constrained sequence, and computes token masks by walking it
// depth first with an incremental recogniser: a token is allowed when the recogniser accepts
// all its bytes, and a whole subtree is skipped as soon as its prefix is rejected.
//
// The trie is stored as an array of nodes in depth-first preorder; every node records where
// its subtree ends, so skipping a subtree is one index jump and the walk needs no recursion.
package tokentrie

import (
	"sort"

	"github.com/loomlm/loom/core"
)

// node is one trie node: the byte on the edge from its parent, its depth (bytes from the
// root), where its subtree ends in the node array, and the tokens whose bytes end here.
type node struct {
	b     byte
	depth uint16
	end   int32 // index just past the subtree
	tokLo int32 // tokens[tokLo:tokHi] end at this node
	tokHi int32
}

// Trie is the vocabulary's tokens with non-empty bytes, as a trie. It is immutable and safe
// for concurrent use.
type Trie struct {
	nodes  []node // nodes[0] is the root (the empty prefix)
	tokens []core.TokenID
	vocab  int
	empty  []core.TokenID // tokens with no bytes (control tokens)
	maxLen int
}

// New builds the trie of tok's vocabulary. Tokens with no bytes (control tokens) are not in
// the trie; Empty lists them.
func New(tok core.Tokenizer) *Trie {
	n := tok.VocabSize()
	byts := make([][]byte, n)
	ids := make([]core.TokenID, 0, n)
	t := &Trie{vocab: n}
	for i := range n {
		b := tok.TokenBytes(core.TokenID(i))
		if len(b) == 0 {
			t.empty = append(t.empty, core.TokenID(i))
			continue
		}
		byts[i] = b
		ids = append(ids, core.TokenID(i))
		t.maxLen = max(t.maxLen, len(b))
	}
	sort.SliceStable(ids, func(a, b int) bool { return string(byts[ids[a]]) < string(byts[ids[b]]) })
	// Sorted byte strings visit the trie in preorder: each token's path shares with the
	// previous one exactly their common prefix.
	t.nodes = append(t.nodes, node{})
	stack := []int32{0} // stack[d] is the open node at depth d
	var prev []byte
	for _, id := range ids {
		b := byts[id]
		common := 0
		for common < len(b) && common < len(prev) && b[common] == prev[common] {
			common++
		}
		for len(stack) > common+1 { // close the nodes deeper than the common prefix
			top := stack[len(stack)-1]
			t.nodes[top].end = int32(len(t.nodes))
			stack = stack[:len(stack)-1]
		}
		for d := common; d < len(b); d++ {
			t.nodes = append(t.nodes, node{b: b[d], depth: uint16(d + 1)})
			stack = append(stack, int32(len(t.nodes)-1))
		}
		last := &t.nodes[stack[len(stack)-1]]
		if last.tokHi == 0 {
			last.tokLo = int32(len(t.tokens))
		}
		t.tokens = append(t.tokens, id)
		last.tokHi = int32(len(t.tokens))
		prev = b
	}
	for _, top := range stack {
		t.nodes[top].end = int32(len(t.nodes))
	}
	return t
}

// VocabSize is the size of the vocabulary the trie was built from.
func (t *Trie) VocabSize() int { return t.vocab }

// Nodes is the number of trie nodes, the root included.
func (t *Trie) Nodes() int { return len(t.nodes) }

// Empty lists the tokens with no bytes.
func (t *Trie) Empty() []core.TokenID { return t.empty }

// MaxTokenLen is the length in bytes of the longest token.
func (t *Trie) MaxTokenLen() int { return t.maxLen }
