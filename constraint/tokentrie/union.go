package tokentrie

import (
	"slices"

	"github.com/loomlm/loom/constraint/internal/digest"
)

// maxUnionStates bounds the states of a union automaton.
const maxUnionStates = 4096

// Union returns the automaton of the union of the languages of parts (each run any number of
// copies; the union counts none), built by the product construction over the states reachable
// from the parts' starts, or nil past maxUnionStates states. A walk takes a union's slice
// where the parser may run several repetitions from one state — the rest of a property name
// that may match a pattern or not — and a token accepted by any of them is accepted. Where one
// part is alive in every reachable state of the product, the union keeps exactly the byte
// strings that part keeps alive, and Union returns that part, whose slice a walk may already
// have (it counts copies if the part does: take only its unbounded slice). Parts with a
// Table are read from it, and bytes that every part maps alike (for property names, every
// byte that no name has at any point) are stepped once per state (byteClasses).
func Union(parts ...Automaton) Automaton {
	u := &union{trans: make([]uint16, 0, 64*256)}
	n := len(parts)
	ids := newTupleIDs(n)
	var states []uint32 // state q's tuple of part states: states[q*n : (q+1)*n]
	for _, p := range parts {
		states = append(states, p.Start())
	}
	ids.add(states)
	covers := make([]bool, n) // part i alive in every reachable state so far
	for i := range covers {
		covers[i] = true
	}
	next := make([]uint32, n) // scratch: copied only when it is a new state
	steppers := make([]stepper, n)
	for i, p := range parts {
		steppers[i] = newStepper(p)
	}
	rep := byteClasses(steppers)
	for q := 0; q*n < len(states); q++ {
		cur := states[q*n : (q+1)*n]
		for i, st := range cur {
			if st == 0 {
				covers[i] = false
			}
		}
		row := len(u.trans)
		if cap(u.trans)-row < 256 { // grow by doubling, not append's quarter for large slices
			u.trans = append(make([]uint16, 0, 2*cap(u.trans)), u.trans...)
		}
		u.trans = u.trans[:row+256]
		out := u.trans[row : row+256]
		for b := range 256 {
			if r := rep[b]; r != byte(b) { // the same in every part as an earlier byte
				out[b] = out[r]
				continue
			}
			alive := false
			for i := range steppers {
				next[i] = 0
				if s := cur[i]; s != 0 {
					if steppers[i].trans != nil {
						next[i], _ = steppers[i].table(s, byte(b))
					} else {
						next[i], _ = steppers[i].Step(s, byte(b))
					}
					alive = alive || next[i] != 0
				}
			}
			if !alive {
				out[b] = 0
				continue
			}
			id, ok := ids.get(next, states)
			if !ok {
				if len(states)/n == maxUnionStates {
					return nil
				}
				states = append(states, next...)
				cur = states[q*n : (q+1)*n] // states may have moved
				id = ids.add(states)
			}
			out[b] = uint16(id)
		}
	}
	for i, c := range covers {
		if c {
			return parts[i]
		}
	}
	h := digest.New()
	h.Uint16s(u.trans)
	u.key = h.Key("union")
	return u
}

// tupleIDs numbers the tuples of part states of a product construction (from 1, in the order
// added), in a table of open addressing over the tuples themselves (Union's states): a Go map
// keyed by the tuples' bytes spent most of the construction hashing and comparing keys.
type tupleIDs struct {
	n     int
	slots []uint32 // 0: empty; else a tuple's number
}

func newTupleIDs(n int) *tupleIDs { return &tupleIDs{n: n, slots: make([]uint32, 1024)} }

func tupleHash(st []uint32) uint64 {
	h := uint64(0x9e3779b97f4a7c15)
	for _, s := range st {
		h = (h ^ uint64(s)) * 0xbf58476d1ce4e5b9
	}
	return h ^ h>>31
}

// get returns the number of tuple st among states (the tuples numbered so far, n values each).
func (t *tupleIDs) get(st, states []uint32) (uint32, bool) {
	mask := uint64(len(t.slots) - 1)
	for i := tupleHash(st) & mask; ; i = (i + 1) & mask {
		id := t.slots[i]
		if id == 0 {
			return 0, false
		}
		if slices.Equal(states[int(id-1)*t.n:int(id)*t.n], st) {
			return id, true
		}
	}
}

// add numbers the last tuple of states (not numbered yet) and returns its number.
func (t *tupleIDs) add(states []uint32) uint32 {
	id := uint32(len(states) / t.n)
	if 2*int(id) > len(t.slots) { // keep the table at most half full
		t.slots = make([]uint32, 2*len(t.slots))
		for j := uint32(1); j < id; j++ {
			t.put(j, states)
		}
	}
	t.put(id, states)
	return id
}

func (t *tupleIDs) put(id uint32, states []uint32) {
	mask := uint64(len(t.slots) - 1)
	i := tupleHash(states[int(id-1)*t.n:int(id)*t.n]) & mask
	for t.slots[i] != 0 {
		i = (i + 1) & mask
	}
	t.slots[i] = id
}

// union is a product automaton (see Union): trans[(s-1)*256+b] is the state after b (at
// most maxUnionStates).
type union struct {
	trans []uint16
	key   string
}

func (u *union) Key() string   { return u.key }
func (u *union) Start() uint32 { return 1 }
func (u *union) Counted() bool { return false }
func (u *union) Step(s uint32, b byte) (uint32, bool) {
	return uint32(u.trans[(int(s)-1)*256+int(b)]), false
}

// Table implements Table: a union starts no copies.
func (u *union) Table() ([]uint16, []uint64) { return u.trans, nil }

// byteClasses returns, for every byte, the first byte that every part's table maps exactly
// as it (the same state after it from every state): the product construction computes one
// byte of each class and copies it to the others, which keeps the states' numbering. A part
// without a table puts every byte in a class of its own.
func byteClasses(parts []stepper) [256]byte {
	var rep [256]byte
	for b := range rep {
		rep[b] = byte(b)
	}
	for _, p := range parts {
		if p.trans == nil {
			return rep
		}
	}
	var hash [256]uint64
	for _, p := range parts {
		for row := 0; row+256 <= len(p.trans); row += 256 {
			for b, t := range p.trans[row : row+256] {
				hash[b] = (hash[b]^uint64(t))*0x100000001b3 + 1
			}
		}
	}
	same := func(a, b int) bool {
		for _, p := range parts {
			for row := 0; row+256 <= len(p.trans); row += 256 {
				if p.trans[row+a] != p.trans[row+b] {
					return false
				}
			}
		}
		return true
	}
	firsts := map[uint64][]byte{} // the classes' first bytes by hash
	for b := range 256 {
		h := hash[b]
		found := false
		for _, f := range firsts[h] {
			if same(int(f), b) {
				rep[b], found = f, true
				break
			}
		}
		if !found {
			firsts[h] = append(firsts[h], byte(b))
		}
	}
	return rep
}
