package tokenizer

// orderable is an element of a bigramHeap: before reports whether it is merged first.
type orderable[T any] interface{ before(T) bool }

// bigramHeap is a binary heap of merge candidates, the first to merge on top (a typed
// container/heap, shared by both tokenizers' merge loops). Its storage is reused between calls.
type bigramHeap[T orderable[T]] []T

func (h *bigramHeap[T]) push(b T) {
	*h = append(*h, b)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !s[i].before(s[p]) {
			break
		}
		s[i], s[p] = s[p], s[i]
		i = p
	}
}

func (h *bigramHeap[T]) pop() T {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		m := l
		if r := l + 1; r < len(s) && s[r].before(s[l]) {
			m = r
		}
		if !s[m].before(s[i]) {
			break
		}
		s[i], s[m] = s[m], s[i]
		i = m
	}
	*h = s
	return top
}
