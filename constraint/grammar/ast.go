// Package grammar reads grammars in GBNF, the notation of llama.cpp's grammar files, and compiles
// them to a byte-level context-free grammar (CFG) for the Earley recogniser in package earley.
//
// A grammar is a list of rules, name ::= expression, and the rule named root (or the start
// rule given to Compile) is the language. Expressions are:
//
//	"text"        a literal string; escapes \t \n \r \\ \" \[ \] \xHH \uHHHH \UHHHHHHHH
//	[a-z0-9_]     a character class of code points and ranges; [^...] is its complement
//	.             any one code point
//	name          a reference to a rule
//	( ... )       a group
//	a b           a sequence
//	a | b         alternatives
//	x? x* x+      optional, zero or more, one or more
//	x{m} x{m,} x{m,n} x{,n}   repetition counts
//	# ...         a comment to the end of the line
//
// A rule ends at the end of its line, except that a line may break after | and anywhere inside
// parentheses. Left recursion is allowed (an Earley parser handles it, and it is the cheaper
// form for it); a reference to an undefined rule, a duplicate rule, and a start rule that
// derives no string at all are errors that name the line and column.
package grammar

import "fmt"

// Pos is a position in grammar source: 1-based line and column (columns count bytes).
type Pos struct{ Line, Col int }

// String formats p as line:col.
func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Line, p.Col) }

// Grammar is a parsed grammar: its rules in source order.
type Grammar struct {
	Rules []Rule
	// RegularGroups, optional, are groups of rule names whose rules refer to each other only
	// in tail position (a regular expression's automaton, one rule per state, the entry
	// first): Compile gives each group's entry rule a prefix automaton (CFG.Prefixes; see
	// NewPrefixGroup).
	RegularGroups [][]string
}

// Rule is one rule, name ::= body.
type Rule struct {
	Name string
	Body Expr
	Pos  Pos // where the name is written
}

// Expr is a node of a rule's body: *Alt, *Seq, *Literal, *Class, *Ref or *Repeat.
type Expr interface{ exprNode() }

// Alt is a choice between alternatives.
type Alt struct{ Alts []Expr }

// Seq is a sequence; an empty Seq matches the empty string.
type Seq struct{ Items []Expr }

// Literal matches its bytes exactly (UTF-8 for text written in the grammar).
type Literal struct{ Text string }

// RuneRange is an inclusive range of code points.
type RuneRange struct{ Lo, Hi rune }

// Class matches one code point in (or, when Negated, not in) its ranges. The any-character
// dot is a negated class with no ranges.
type Class struct {
	Ranges  []RuneRange
	Negated bool
}

// Ref refers to a rule by name.
type Ref struct {
	Name string
	Pos  Pos
}

// Repeat matches Min to Max repetitions of Expr; Max < 0 means unbounded.
type Repeat struct {
	Expr     Expr
	Min, Max int
}

func (*Alt) exprNode()     {}
func (*Seq) exprNode()     {}
func (*Literal) exprNode() {}
func (*Class) exprNode()   {}
func (*Ref) exprNode()     {}
func (*Repeat) exprNode()  {}

// Error is a grammar error at a position of the source.
type Error struct {
	Pos Pos
	Msg string
}

// Error formats the error as line:col: message.
func (e *Error) Error() string { return e.Pos.String() + ": " + e.Msg }
