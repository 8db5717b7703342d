package tokentrie

import (
	"encoding/binary"
	"strings"
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
	u := &union{trans: nil}
	ids := map[string]uint32{}
	var states [][]uint32
	var kbuf []byte // the key of a tuple of part states, reused
	key := func(st []uint32) []byte {
		kbuf = kbuf[:0]
		for _, s := range st {
			kbuf = binary.LittleEndian.AppendUint32(kbuf, s)
		}
		return kbuf
	}
	start := make([]uint32, len(parts))
	for i, p := range parts {
		start[i] = p.Start()
	}
	ids[string(key(start))] = 1
	states = append(states, start)
	covers := make([]bool, len(parts)) // part i alive in every reachable state so far
	for i := range covers {
		covers[i] = true
	}
	next := make([]uint32, len(parts)) // scratch: copied only when it is a new state
	steppers := make([]stepper, len(parts))
	for i, p := range parts {
		steppers[i] = newStepper(p)
	}
	rep := byteClasses(steppers)
	for q := 0; q < len(states); q++ {
		for i, st := range states[q] {
			if st == 0 {
				covers[i] = false
			}
		}
		row := len(u.trans)
		for b := range 256 {
			if r := rep[b]; r != byte(b) { // the same in every part as an earlier byte
				u.trans = append(u.trans, u.trans[row+int(r)])
				continue
			}
			alive := false
			for i := range steppers {
				next[i] = 0
				if s := states[q][i]; s != 0 {
					if steppers[i].trans != nil {
						next[i], _ = steppers[i].table(s, byte(b))
					} else {
						next[i], _ = steppers[i].Step(s, byte(b))
					}
					alive = alive || next[i] != 0
				}
			}
			if !alive {
				u.trans = append(u.trans, 0)
				continue
			}
			k := key(next)
			id, ok := ids[string(k)] // no allocation for the lookup
			if !ok {
				if len(states) == maxUnionStates {
					return nil
				}
				states = append(states, append([]uint32(nil), next...))
				id = uint32(len(states))
				ids[string(k)] = id
			}
			u.trans = append(u.trans, uint16(id))
		}
	}
	for i, c := range covers {
		if c {
			return parts[i]
		}
	}
	var sb strings.Builder
	sb.Grow(len("union") + 2*len(u.trans))
	sb.WriteString("union")
	for _, t := range u.trans {
		sb.WriteByte(byte(t))
		sb.WriteByte(byte(t >> 8))
	}
	u.key = sb.String()
	return u
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
